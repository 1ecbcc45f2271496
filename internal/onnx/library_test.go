package onnx

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/testdeps"
)

func TestLibraryPath(t *testing.T) {
	t.Setenv(LibraryEnv, "")
	if got := LibraryPath(""); got != DefaultLibrary {
		t.Errorf("LibraryPath(\"\") = %q; want %q", got, DefaultLibrary)
	}
	t.Setenv(LibraryEnv, "/opt/ort/libonnxruntime.so")
	if got := LibraryPath(""); got != "/opt/ort/libonnxruntime.so" {
		t.Errorf("LibraryPath(\"\") with $%s set = %q; want its value", LibraryEnv, got)
	}
	if got := LibraryPath("/x/lib.so"); got != "/x/lib.so" {
		t.Errorf("LibraryPath(\"/x/lib.so\") = %q; want the option", got)
	}
}

// TestLoadMissing needs no library: a missing file is refused before
// anything is loaded, whatever this process loaded before.
func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "scripts/install-deps.sh installs it") {
		t.Errorf("Load(%s) = %v; want an error naming the file and scripts/install-deps.sh", path, err)
	}
}

// loadChildEnv marks the process TestLoad starts to run TestLoadChild.
const loadChildEnv = "OMNISTAGE_ONNX_TEST_LOAD_CHILD"

// TestLoad runs TestLoadChild in a process of its own: the library loads
// once per process, so its failures and its one success are tested where
// nothing has loaded it yet.
func TestLoad(t *testing.T) {
	if _, err := os.Stat(DefaultLibrary); err != nil {
		testdeps.Missing(t, "ONNX Runtime's library is not installed (%v): scripts/install-deps.sh installs it", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), loadChildEnv+"=1", LibraryEnv+"=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestLoadChild") {
		t.Fatalf("TestLoadChild: %v\n%s", err, out)
	}
}

// TestLoadChild is TestLoad's process.
func TestLoadChild(t *testing.T) {
	if os.Getenv(loadChildEnv) != "1" {
		t.Skip("run by TestLoad in a process of its own")
	}
	dir := t.TempDir()
	junk := filepath.Join(dir, "libonnxruntime.so.1")
	if err := os.WriteFile(junk, []byte("not a shared library"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.so")
	if err := os.Symlink(DefaultLibrary, link); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		path string
		want string // "" for success
	}{
		{filepath.Join(dir, "missing.so"), "missing.so: no such file or directory (scripts/install-deps.sh installs it at " + DefaultLibrary},
		{junk, junk + " does not load"},
		{dir, dir + " does not load"},
		{"", ""}, // the default, now loaded
		{DefaultLibrary, ""},
		{link, ""}, // the same file
		{junk, "ONNX Runtime is loaded from " + DefaultLibrary + " already; it cannot also be loaded from " + junk},
	}
	if Version() != "" {
		t.Fatalf("Version() = %q before Load", Version())
	}
	for _, s := range steps {
		err := Load(s.path)
		switch {
		case s.want == "" && err != nil:
			t.Fatalf("Load(%q): %v", s.path, err)
		case s.want != "" && (err == nil || !strings.Contains(err.Error(), s.want)):
			t.Fatalf("Load(%q) = %v; want it to say %q", s.path, err, s.want)
		}
	}
	if v := Version(); v != "1.30.0" {
		t.Errorf("Version() = %q; want 1.30.0, the version scripts/install-deps.sh pins", v)
	}
}
