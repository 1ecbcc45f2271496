package subprocess

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testdeps"
)

// alive reports whether process pid runs (a zombie does not: nobody may
// reap an orphan here).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// helperOf starts sh -c script, whose first line of standard output is
// the pid of a process it leaves behind, and returns the child, that pid
// and a reader of the rest of its output. Its standard input ends once
// the pid is read. The process left behind is killed when t ends.
func helperOf(t *testing.T, script string) (*Child, int, *bufio.Reader) {
	t.Helper()
	c, err := Start(Program{Argv: []string{"sh", "-c", script}, Stderr: &LineWriter{OnLine: func([]byte) {}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Wait()
	}()
	r := bufio.NewReader(c.Stdout)
	line, err := r.ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil || pid <= 0 {
		_ = c.Kill()
		<-done
		t.Fatalf("first line %q: %v, %v", line, err, perr)
	}
	_ = c.Stdin.Close()
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = c.Kill()
		<-done
		_ = c.Stdout.Close()
	})
	return c, pid, r
}

// readAll reads r to its end, in a goroutine, and returns how long that
// took and the error that ended it (nil at end of file); it gives up
// after limit.
func readAll(t *testing.T, r io.Reader, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		ended <- err
	}()
	select {
	case err := <-ended:
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("the program's standard output still open after %s", limit)
		return 0, nil
	}
}

// TestWaitKillsTheGroup checks that a program's helper, which holds its
// standard output (sh's &, Python's multiprocessing), dies with it: its
// output ends as it exits, not when the helper would have.
func TestWaitKillsTheGroup(t *testing.T) {
	c, pid, r := helperOf(t, "sleep 30 & echo $!; read x")
	took, err := readAll(t, r, 5*time.Second)
	if err != nil {
		t.Errorf("output ended with %v; want its end", err)
	}
	if took > OutputDelay {
		t.Errorf("output ended %s after the first line; want at once", took)
	}
	if _, ok := c.ExitedWithin(5 * time.Second); !ok {
		t.Fatal("not exited")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("helper %d of the program's group outlived it", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWaitBoundsAnEscapee checks that a process that left the program's
// group (setsid), which Kill cannot reach, holds neither Wait nor the
// reader of the program's standard output past OutputDelay.
func TestWaitBoundsAnEscapee(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		testdeps.Missing(t, "no setsid")
	}
	// The escapee says its pid once it has left the group; the program
	// exits after that.
	c, pid, r := helperOf(t, "setsid sh -c 'echo $$; exec sleep 30' & read x")
	took, err := readAll(t, r, 5*time.Second)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("output ended with %v; want the bound", err)
	}
	if took > OutputDelay+time.Second {
		t.Errorf("output ended %s after the first line; want within %s", took, OutputDelay)
	}
	if _, ok := c.ExitedWithin(time.Second); !ok {
		t.Fatal("Wait still waits")
	}
	if !alive(pid) {
		t.Errorf("the escapee %d died: was it in the group?", pid)
	}
}
