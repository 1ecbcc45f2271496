// Package cdriver builds and runs the C drivers that the flite and sphinx
// tests exercise their cgo layers with from several threads at once,
// outside Go, where valgrind's thread checkers can follow them: a driver
// is the package's C files and a main of its own (testdata/cdriver), built
// with the flags of the package's cgo directives.
//
// A driver runs on its own by default; with the flag -valgrind=TOOL
// (helgrind, drd or memcheck, given after -args) it runs under that tool,
// and any error it reports fails the test:
//
//	go test -run TestCDriver ./internal/engine/sphinx -args -valgrind=helgrind
package cdriver

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Valgrind is the valgrind tool the drivers run under, "" for none.
var Valgrind = flag.String("valgrind", "", "run the C drivers under this valgrind tool (helgrind, drd, memcheck)")

// cgoDirective matches a #cgo line of a Go file's preamble.
var cgoDirective = regexp.MustCompile(`(?m)^#cgo\s+(CFLAGS|LDFLAGS|pkg-config):(.*)$`)

// Flags returns the C compiler and linker flags of the #cgo directives in
// the Go file goFile, pkg-config's included.
func Flags(t testing.TB, goFile string) []string {
	t.Helper()
	src, err := os.ReadFile(goFile)
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, m := range cgoDirective.FindAllStringSubmatch(string(src), -1) {
		if m[1] != "pkg-config" {
			flags = append(flags, strings.Fields(m[2])...)
			continue
		}
		out, err := exec.Command("pkg-config", append([]string{"--cflags", "--libs"}, strings.Fields(m[2])...)...).Output()
		if err != nil {
			t.Fatalf("pkg-config %s: %v", m[2], err)
		}
		flags = append(flags, strings.Fields(string(out))...)
	}
	return flags
}

// Build compiles sources, with the include directories in includes, and
// links them with flags into an executable in a temporary directory.
func Build(t testing.TB, sources, includes, flags []string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	exe := filepath.Join(t.TempDir(), "driver")
	args := []string{"-O1", "-g", "-Wall", "-o", exe}
	for _, dir := range includes {
		args = append(args, "-I", dir)
	}
	args = append(append(append(args, sources...), flags...), "-lpthread")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
	}
	return exe
}

// Run runs the driver exe with args, under Valgrind's tool when set, and
// fails t unless it exits 0 and the tool reports no error. It returns the
// driver's output and, under a tool, the tool's summary line.
func Run(t testing.TB, exe string, args ...string) string {
	t.Helper()
	name := exe
	if *Valgrind != "" {
		if _, err := exec.LookPath("valgrind"); err != nil {
			t.Skip("valgrind is not installed")
		}
		name = "valgrind"
		args = append([]string{"--tool=" + *Valgrind, "--error-exitcode=99", exe}, args...)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(append([]string{name}, args...), " "), err, out)
	}
	report := lastLine(out, func(l string) bool { return !strings.HasPrefix(l, "==") })
	if *Valgrind != "" {
		report += "; " + *Valgrind + ": " + lastLine(out, func(l string) bool { return strings.Contains(l, "ERROR SUMMARY") })
	}
	return report
}

// lastLine returns the last line of out that keep accepts.
func lastLine(out []byte, keep func(string) bool) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if keep(lines[i]) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
