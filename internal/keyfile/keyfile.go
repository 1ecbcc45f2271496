// Package keyfile reads the secrets a server is given in files or in its
// environment: /v1/run payload keys and API keys (bearer tokens). Every
// such secret is read one way, with the same rules.
package keyfile

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// PayloadKeyEnv is the environment variable that holds a server's /v1/run
// payload key when no key file is given (and in which a worker process
// gets the key its parent chose).
const PayloadKeyEnv = "OMNISTAGE_PAYLOAD_KEY"

// MinLen is the shortest key accepted: payload keys and bearer tokens
// shorter than this are guessable.
const MinLen = 16

// MaxFileSize bounds a key file: a key is tens of bytes, and a file that
// is longer is not one (a log, a device that never ends).
const MaxFileSize = 4 << 10

// Key is a key read from a file, with what a reload compares it with.
type Key struct {
	// Value is the key, surrounding white space dropped.
	Value string
	// Newline records whether the file ended with a line feed, as every
	// key written by the usual commands does (base64, openssl rand -hex).
	Newline bool
}

// Read reads a key from file, dropping surrounding white space. A file
// that is not a regular file (a FIFO, which would block the read, a
// device), is longer than MaxFileSize, is empty, or holds a key shorter
// than MinLen, is refused with a message saying how to make a good one.
func Read(file string) (string, error) {
	k, err := ReadKey(file)
	return k.Value, err
}

// ReadKey is Read, with what the file's end looked like.
func ReadKey(file string) (Key, error) {
	if file == "" {
		return Key{}, errors.New("no key file")
	}
	fi, err := os.Stat(file)
	if err != nil {
		return Key{}, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return Key{}, fmt.Errorf("%s is not a regular file (%s): a key file holds the key, as a file written once", file, fi.Mode().Type())
	case fi.Size() > MaxFileSize:
		return Key{}, fmt.Errorf("%s is %d bytes long: a key file holds one key of tens of bytes, at most %d", file, fi.Size(), MaxFileSize)
	}
	f, err := os.Open(file)
	if err != nil {
		return Key{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	switch {
	case err != nil:
		return Key{}, err
	case len(b) > MaxFileSize:
		return Key{}, fmt.Errorf("%s is longer than %d bytes: a key file holds one key", file, MaxFileSize)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return Key{}, fmt.Errorf("%s is empty", file)
	}
	if err := checkKey(key); err != nil {
		return Key{}, fmt.Errorf("%s: %v (e.g. head -c 32 /dev/urandom | base64 > %s)", file, err, file)
	}
	return Key{Value: key, Newline: bytes.HasSuffix(b, []byte("\n"))}, nil
}

// checkKey refuses a key that is too short.
func checkKey(key string) error {
	if len(key) < MinLen {
		return fmt.Errorf("the key is %d bytes long; use at least %d", len(key), MinLen)
	}
	return nil
}

// CheckReload refuses k, read from a file again (a reload), when next to
// prev, what the file held before, it looks like a file caught while it
// was being written: prev ended with a line feed and k does not, or prev
// was base64 or hex (the forms of the usual commands) of at least MinLen
// bytes and k is of the same form but decodes to fewer.
func CheckReload(k, prev Key) error {
	if prev.Newline && !k.Newline {
		return errors.New("the key does not end with a line feed, as the one before did: is the file still being written? (write key files whole: to a new file, then mv it in place)")
	}
	pn, pok := decodedLen(prev.Value)
	n, ok := decodedLen(k.Value)
	if pok && ok && pn >= MinLen && n < MinLen {
		return fmt.Errorf("the key's %d characters decode to %d bytes, the one before to %d: is the file complete? (write key files whole: to a new file, then mv it in place)", len(k.Value), n, pn)
	}
	return nil
}

// decodedLen returns the length key decodes to when it is base64 (with or
// without padding) or hex, and false when it is neither.
func decodedLen(key string) (int, bool) {
	if _, err := hex.DecodeString(key); err == nil {
		return len(key) / 2, true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(key); err == nil {
			return len(b), true
		}
	}
	return 0, false
}

// FromEnv returns the key in variable name of getenv's environment, "" when
// it is unset or empty, and an error (which does not name the variable)
// when it is too short.
func FromEnv(getenv func(string) string, name string) (string, error) {
	key := strings.TrimSpace(getenv(name))
	if key == "" {
		return "", nil
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("%v (e.g. head -c 32 /dev/urandom | base64)", err)
	}
	return key, nil
}
