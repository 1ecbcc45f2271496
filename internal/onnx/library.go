package onnx

// Loading ONNX Runtime's shared library, once per process.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// DefaultLibrary is where scripts/install-deps.sh (and the image) put ONNX
// Runtime's C library.
const DefaultLibrary = "/usr/local/lib/omnistage/libonnxruntime.so.1"

// LibraryEnv is the environment variable that names the library when a
// stage's options do not.
const LibraryEnv = "OMNISTAGE_ONNXRUNTIME"

// LibraryPath returns the library to load: option if set, else $LibraryEnv
// if set, else DefaultLibrary.
func LibraryPath(option string) string {
	if option != "" {
		return option
	}
	if p := os.Getenv(LibraryEnv); p != "" {
		return p
	}
	return DefaultLibrary
}

// library is the process's one ONNX Runtime: the path it was loaded from,
// empty until a load succeeds.
var library struct {
	mu     sync.Mutex
	loaded string
}

// Load loads ONNX Runtime from LibraryPath(option) and sets up its
// environment, once per process; later calls for the same file return
// nil. The library cannot be unloaded or replaced: a call naming another
// file is an error that names both. A failed load changes nothing, so a
// later call may name the right file.
func Load(option string) error {
	path := LibraryPath(option)
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("onnx: library %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("onnx: ONNX Runtime library %s: %w (scripts/install-deps.sh installs it at %s; the stage option library or $%s names another)",
			path, unwrapPath(err), DefaultLibrary, LibraryEnv)
	}
	library.mu.Lock()
	defer library.mu.Unlock()
	if library.loaded != "" {
		if sameFile(library.loaded, abs) {
			return nil
		}
		return fmt.Errorf("onnx: ONNX Runtime is loaded from %s already; it cannot also be loaded from %s in the same process", library.loaded, abs)
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return errors.New("onnx: this machine is big-endian; tensors are little-endian and this backend does not convert them")
	}
	ort.SetSharedLibraryPath(abs)
	// Errors reach the caller as errors; ONNX Runtime's own log would
	// print them again on stderr, past the server's logger.
	if err := ort.InitializeEnvironment(ort.WithLogLevelFatal()); err != nil {
		return fmt.Errorf("onnx: ONNX Runtime library %s does not load: %w (scripts/install-deps.sh installs a working one at %s)", path, err, DefaultLibrary)
	}
	library.loaded = abs
	return nil
}

// Version returns the loaded library's version ("1.30.0"), or "" before
// Load.
func Version() string {
	library.mu.Lock()
	defer library.mu.Unlock()
	if library.loaded == "" {
		return ""
	}
	return ort.GetVersion()
}

// sameFile reports whether a and b name one file (a symbolic link and its
// target are one library).
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// unwrapPath drops the path an *os.PathError repeats, since the message
// names the file already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
