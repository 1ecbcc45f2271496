package subprocess

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start starts p, waits for it on a goroutine, and returns the child and
// its standard output, read whole once it has exited.
func start(t *testing.T, p Program) (*Child, func() string) {
	t.Helper()
	c, err := Start(p)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Wait()
	}()
	t.Cleanup(func() {
		_ = c.Kill()
		<-done
	})
	return c, func() string {
		if _, ok := c.ExitedWithin(10 * time.Second); !ok {
			t.Fatal("the program did not exit")
		}
		b, err := io.ReadAll(c.Stdout)
		_ = c.Stdout.Close()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// TestStartCleanEnvironment checks that a program gets PATH and its env,
// nothing else of this process's environment.
func TestStartCleanEnvironment(t *testing.T) {
	t.Setenv("OMNISTAGE_SECRET", "not for children")
	c, out := start(t, Program{Argv: []string{"env"}, Env: map[string]string{"VOICE": "en-us"}})
	_ = c.Stdin.Close()
	got := strings.Fields(out())
	slices.Sort(got)
	want := []string{"PATH=" + os.Getenv("PATH"), "VOICE=en-us"}
	if !slices.Equal(got, want) {
		t.Fatalf("environment %q; want %q", got, want)
	}
}

// TestStartOutputAfterExit checks that what a program wrote last is read
// after it has exited, its last line of standard error handed on, and
// how it ended said.
func TestStartOutputAfterExit(t *testing.T) {
	var lines []string
	stderr := &LineWriter{OnLine: func(b []byte) { lines = append(lines, string(b)) }}
	dir := t.TempDir()
	c, out := start(t, Program{Argv: []string{"sh", "-c", "pwd; printf last; printf 'no newline' >&2; exit 3"}, Dir: dir, Stderr: stderr})
	if c.Pid() <= 0 {
		t.Errorf("pid %d", c.Pid())
	}
	if got := out(); got != dir+"\nlast" {
		t.Errorf("standard output %q; want the directory and %q", got, "last")
	}
	if c.How() != "exit status 3" || c.State().ExitCode() != 3 {
		t.Errorf("ended %q", c.How())
	}
	if !slices.Equal(lines, []string{"no newline"}) {
		t.Errorf("standard error %q", lines)
	}
}

func TestStartRefuses(t *testing.T) {
	for _, p := range []Program{{}, {Argv: []string{""}}, {Argv: []string{"/no/such/program"}}} {
		if c, err := Start(p); err == nil {
			_ = c.Kill()
			t.Errorf("%q started", p.Argv)
		}
	}
}
