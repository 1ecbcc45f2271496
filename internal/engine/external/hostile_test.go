package external

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/subprocess"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestCloseKillsHelpers checks that a program's helper, which holds its
// standard output, neither holds Close until it ends nor outlives the
// program.
func TestCloseKillsHelpers(t *testing.T) {
	e, stderr := start(t, "helper")
	var pid int
	testkit.Eventually(t, "the helper's pid", func() bool {
		m := regexp.MustCompile(`helper pid (\d+)`).FindStringSubmatch(stderr.String())
		if m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
		return pid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // runs before start's Close
	if out, err := run(context.Background(), e, "", audio(16000, 1)); err != nil || len(out) != 1 {
		t.Fatalf("job: %v, %v", out, err)
	}
	closed := make(chan error, 1)
	begun := time.Now()
	go func() { closed <- e.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for the program's helper")
	}
	t.Logf("closed in %s", time.Since(begun))
	testkit.Eventually(t, "the helper's end", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}

// TestStderrFlood checks that a program flooding its standard error
// writes no more than its limit to the log, says how much it dropped,
// and still reports its last lines when it is lost.
func TestStderrFlood(t *testing.T) {
	begun := time.Now() // the bucket starts full as the replica does
	e, stderr := start(t, "stderrflood")
	if _, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2), audio(16000, 3)); err != nil {
		t.Fatal(err)
	}
	// 12 MB written; what the log took is bounded by the bucket (and a few
	// lines not the program's: the counts of bytes dropped).
	testkit.Eventually(t, "the last chunk's line", func() bool {
		return len(e.console.Tail()) > 0 && e.console.Tail()[len(e.console.Tail())-1] == "chunk 2 flooded"
	})
	logged := len(stderr.String())
	if bound := subprocess.LogBurst + int(time.Since(begun).Seconds()*subprocess.LogRate) + 8<<10; logged > bound {
		t.Errorf("the log took %d bytes of a 12 MB flood; want at most %d", logged, bound)
	}
	_ = e.child.Kill()
	<-e.Lost()
	log := stderr.String()
	if !regexp.MustCompile(`\d+ bytes of standard error dropped \(past the limit of 65536 bytes per second\)`).MatchString(log) {
		t.Errorf("the log does not count the bytes dropped: ...%s", log[max(0, len(log)-500):])
	}
	if d := e.lostDetail().Error(); !strings.Contains(d, "chunk 2 flooded") {
		t.Errorf("the loss's detail %.300q...; want the last lines, dropped from the log or not", d)
	}
}

// TestDefaultTimeout checks that a job's silence is bounded when the
// stage sets no timeout, and by the stage's own when it does.
func TestDefaultTimeout(t *testing.T) {
	e, _ := start(t, "echo")
	if e.spec.Timeout != DefaultTimeout {
		t.Errorf("timeout %s; want the default, %s", e.spec.Timeout, DefaultTimeout)
	}
	e2, _ := start(t, "echo", func(s *engine.Spec, _ *Config) { s.Timeout = time.Hour })
	if e2.spec.Timeout != time.Hour {
		t.Errorf("timeout %s; want the stage's, 1h", e2.spec.Timeout)
	}
}

// TestDetailedErrors checks that the stage's detailed_errors gives the
// error of a lost replica the program's command, pid and last output.
func TestDetailedErrors(t *testing.T) {
	e, _ := start(t, "crash", func(s *engine.Spec, _ *Config) { s.Options["detailed_errors"] = true })
	_, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2))
	if !errors.Is(err, engine.ErrReplicaLost) {
		t.Fatalf("error %v; want a lost replica", err)
	}
	for _, w := range []string{os.Args[0], "(pid ", "about to crash", "exit status 3"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q; want it to say %q", err, w)
		}
	}
}
