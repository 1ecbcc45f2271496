package sessions

import (
	"testing"
	"time"
)

// TestLimit: places are given up to the bound; past it, the session idle
// the longest for the grace is evicted (told once, and counted no more),
// busy ones and those idle for less are not, and with none to evict the
// new session is refused.
func TestLimit(t *testing.T) {
	l := NewLimit(3, time.Minute)
	evicted := map[string]int{}
	take := func(name string) *Slot {
		t.Helper()
		s, ok := l.Take(func() { evicted[name]++ })
		if !ok {
			t.Fatalf("%s refused", name)
		}
		return s
	}
	a, b, c := take("a"), take("b"), take("c")
	if _, ok := l.Take(func() {}); ok {
		t.Fatal("a fourth session got a place among three busy ones")
	}
	now := time.Now()
	b.Idle(true)
	c.Idle(true)
	if _, ok := l.Take(func() {}); ok {
		t.Fatal("a session idle for less than the grace was evicted")
	}
	// Idle for longer than the grace: c the longest.
	l.mu.Lock()
	b.since, c.since = now.Add(-2*time.Minute), now.Add(-3*time.Minute)
	l.mu.Unlock()
	d := take("d")
	if evicted["c"] != 1 || evicted["b"] != 0 || l.Open() != 3 {
		t.Fatalf("evicted %v, %d open; want c evicted, 3 open", evicted, l.Open())
	}
	c.Release() // the evicted session ends: nothing changes
	if l.Open() != 3 {
		t.Fatalf("%d open after the evicted one ended", l.Open())
	}
	// Busy again, b may not go; a idle for long may.
	b.Idle(false)
	a.Idle(true)
	l.mu.Lock()
	a.since = now.Add(-time.Hour)
	l.mu.Unlock()
	take("e")
	if evicted["a"] != 1 || evicted["b"] != 0 {
		t.Fatalf("evicted %v; want a", evicted)
	}
	if _, ok := l.Take(func() {}); ok {
		t.Fatal("a session got a place among busy ones")
	}
	d.Release()
	take("f")
	if l.Open() != 3 {
		t.Fatalf("%d open", l.Open())
	}
}

// TestShare: each pipeline's live requests hold at most its share of its
// slots (at least one), apart from the others', and a release, given
// once or twice, frees one.
func TestShare(t *testing.T) {
	if _, err := NewShare(0); err == nil {
		t.Error("a share of 0 was taken")
	}
	s, err := NewShare(0.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ slots, cap int }{{64, 32}, {3, 1}, {1, 1}, {2, 1}} {
		if got := s.Cap(tc.slots); got != tc.cap {
			t.Errorf("the share of %d slots: %d, want %d", tc.slots, got, tc.cap)
		}
	}
	var releases []func()
	for range 32 {
		r, ok := s.Take("a", 64)
		if !ok {
			t.Fatalf("refused after %d", len(releases))
		}
		releases = append(releases, r)
	}
	if _, ok := s.Take("a", 64); ok {
		t.Fatal("a 33rd live request of 64 slots at a half share")
	}
	if _, ok := s.Take("b", 64); !ok {
		t.Fatal("another pipeline's refused")
	}
	releases[0]()
	releases[0]()
	r, ok := s.Take("a", 64)
	if !ok {
		t.Fatal("refused after a release")
	}
	if _, ok := s.Take("a", 64); ok {
		t.Fatal("a second release freed a second slot")
	}
	r()
}
