// Package testkit holds what the tests of several packages share: polling
// for a condition, a buffer that concurrent writers (a process's output, a
// logger) may share, the built-in pipeline with a test's own deploy
// section, and the batches a pipeline's metrics counted. Only tests
// import it.
package testkit

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/pipeline"
)

// Timeout bounds Eventually: long enough for a slow, shared machine, short
// enough for a broken test to fail rather than hang.
const Timeout = 15 * time.Second

// Eventually polls cond every millisecond until it holds, and fails the
// test, naming what it waited for, if it does not within Timeout.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// SyncBuffer is a bytes.Buffer that concurrent writers may share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BuiltinWith returns the configuration text of the built-in pipeline name
// with its deploy section replaced by deployStages: one "    - {...}" line
// per stage, as under deploy.stages. With none, every stage takes the
// defaults. The pipeline part is the shipped file's, so tests follow it.
func BuiltinWith(tb testing.TB, name, deployStages string) string {
	tb.Helper()
	data, err := pipeline.BuiltinYAML(name)
	if err != nil {
		tb.Fatal(err)
	}
	head, _, ok := strings.Cut(string(data), "\ndeploy:\n")
	if !ok {
		tb.Fatalf("built-in %s has no deploy section", name)
	}
	if deployStages == "" {
		deployStages = "    - {id: 0}\n"
	}
	return head + "\ndeploy:\n  stages:\n" + deployStages
}

// Parse parses a configuration, failing the test on any error.
func Parse(tb testing.TB, yaml string) *pipeline.Config {
	tb.Helper()
	cfg, err := pipeline.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// FreeAddr returns a loopback host:port where nothing listens: a port the
// kernel just handed out and took back, for a server to bind or a dialer to
// be refused.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
