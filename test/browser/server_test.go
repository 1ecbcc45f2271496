package browser

// The server under test: cmd/omnistage built as a user builds it, and
// `omnistage serve` processes on ephemeral ports.

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildOmnistage builds cmd/omnistage as a user does and returns its path.
func buildOmnistage(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "omnistage")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/omnistage")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/omnistage: %v\n%s", err, out)
	}
	return bin
}

// server is an `omnistage serve` process.
type server struct {
	url, host string
	cmd       *exec.Cmd
	out       *syncBuffer // its stderr: JSON log lines
	done      chan error
}

// listening matches the server's log line that names its address.
var listening = regexp.MustCompile(`"msg":"http server listening","addr":"([0-9.:]+)"`)

// serve starts `omnistage serve --addr 127.0.0.1:0 args...`, returns once
// it is ready, and stops it with SIGTERM when the test ends. Ready is each
// of the pipelines ready names (GET /ready?model=), for a server that
// serves some that never start (--start-partial); without any, all of
// them (GET /ready).
func serve(t *testing.T, bin string, ready []string, args ...string) *server {
	t.Helper()
	s := &server{out: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	s.cmd.Stderr = s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(time.Minute)
	for {
		if m := listening.FindStringSubmatch(s.out.String()); m != nil {
			s.host, s.url = m[1], "http://"+m[1]+"/"
			break
		}
		s.wait(t, deadline)
	}
	paths := []string{"ready"}
	if len(ready) > 0 {
		paths = nil
		for _, m := range ready {
			paths = append(paths, "ready?model="+url.QueryEscape(m))
		}
	}
	for _, path := range paths {
		for !s.answersOK(path) {
			s.wait(t, deadline)
		}
	}
	return s
}

// answersOK reports whether GET path answers 200.
func (s *server) answersOK(path string) bool {
	resp, err := http.Get(s.url + path)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// wait pauses while s starts, failing the test if s has exited or the
// deadline has passed.
func (s *server) wait(t *testing.T, deadline time.Time) {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		t.Fatalf("omnistage serve exited while starting (%v):\n%s", err, s.out)
	case <-time.After(20 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		t.Fatalf("omnistage serve not ready after a minute:\n%s", s.out)
	}
}

func (s *server) stop(t *testing.T) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("omnistage serve: %v\n%s", err, s.out)
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("omnistage serve did not stop within 30 s")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
