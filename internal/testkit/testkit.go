// Package testkit holds what the tests of several packages share: polling
// for a condition, and a buffer that concurrent writers (a process's
// output, a logger) may share. Only tests import it.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
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
