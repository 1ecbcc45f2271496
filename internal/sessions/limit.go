package sessions

// The bound on the sessions open at once, and which session gives up its
// place to a new one.

import (
	"sync"
	"time"
)

// EvictGrace is how long a session must have been idle before it may
// give up its place to a new one: a client between its connect and its
// first event, or between two quick utterances, keeps its session.
const EvictGrace = time.Second

// Limit bounds the sessions open at once. When all places are taken, a
// new session takes the place of the open one idle the longest (idle: no
// work of its client under way, as its owner says with Slot.Idle), if that
// one has been idle for at least the grace; that session is told to end
// (its evict function), and counts no more. When none may go, the new one
// is refused. It is safe for concurrent use.
type Limit struct {
	max   int
	grace time.Duration

	mu    sync.Mutex
	slots map[*Slot]struct{}
}

// NewLimit returns a Limit of max places whose sessions may be evicted
// once idle for grace.
func NewLimit(max int, grace time.Duration) *Limit {
	return &Limit{max: max, grace: grace, slots: map[*Slot]struct{}{}}
}

// Slot is one session's place. A new one is idle since it was taken (its
// session connected), so that sessions that never had work go in the
// order they came, whenever their owners first say so.
type Slot struct {
	l     *Limit
	evict func()
	idle  bool
	since time.Time // when it became idle
}

// Take returns a place for a new session, which evict tells to end should
// another need its place; evict is called at most once, on the caller of
// Take of that other session, and must not block. It returns false when
// every place is held by a session that may not go.
func (l *Limit) Take(evict func()) (*Slot, bool) {
	l.mu.Lock()
	var victim *Slot
	if len(l.slots) >= l.max {
		if victim = l.longestIdle(); victim == nil {
			l.mu.Unlock()
			return nil, false
		}
		delete(l.slots, victim)
	}
	s := &Slot{l: l, evict: evict, idle: true, since: time.Now()}
	l.slots[s] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		victim.evict()
	}
	return s, true
}

// longestIdle returns the session idle the longest, for at least the
// grace, or nil; l.mu is held.
func (l *Limit) longestIdle() *Slot {
	cut := time.Now().Add(-l.grace)
	var best *Slot
	for s := range l.slots {
		if s.idle && !s.since.After(cut) && (best == nil || s.since.Before(best.since)) {
			best = s
		}
	}
	return best
}

// Open returns the number of sessions that hold a place.
func (l *Limit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots)
}

// Idle says whether the session has work of its client under way: an
// idle one may be evicted once idle for the grace.
func (s *Slot) Idle(idle bool) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if idle && !s.idle {
		s.since = time.Now()
	}
	s.idle = idle
}

// Release gives the place back; after an eviction it does nothing.
func (s *Slot) Release() {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	delete(s.l.slots, s)
}
