// Package turns shares the CPU among the requests of a server by their
// playback deadlines: engines run each unit of CPU work (a sentence's
// synthesis, its vocoding, its alignment) in a turn, and of the units
// waiting, the one whose request will run out of audio first goes next.
//
// # Why
//
// A request's listener waits for its first audio only: the rest of it
// streams faster than it plays. With every request advancing at the same
// pace, eight requests at once on two cores all start speaking as late as
// they end. Ordered by deadline, a request that has not spoken yet (its
// deadline is its arrival) goes ahead of the later sentences of requests
// that have audio in hand (their deadline is shortly before that audio
// runs out),
// and a stream whose audio runs low comes back to the front before its
// listener hears a gap.
//
// # The scheduler
//
// A Scheduler has a number of turns that may run at once (about the
// cores it may use: NewDefault); Acquire waits for a free one, earliest deadline
// first, ties in arrival order. A unit that runs long in one piece (a
// sentence's vocoding, which hands over its audio block by block) calls
// Yield between its pieces: when a unit due earlier waits, it takes the
// turn, and the yielding one waits for the next, again by deadline; when
// none does, Yield returns at once. A turn must not wait for anything but
// the CPU (no Send, no Recv): a turn held across a wait would stall the
// other requests.
package turns

import (
	"container/heap"
	"context"
	"runtime"
	"sync"
	"time"
)

// Scheduler gives turns to units of work, earliest deadline first.
type Scheduler struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting waitHeap
}

// New returns a scheduler of n turns at once (at least one).
func New(n int) *Scheduler { return &Scheduler{free: max(n, 1)} }

// NewDefault returns the scheduler of a process: one turn more than
// GOMAXPROCS. The turns are taken by the engines' C calls, but the Go
// side of every stage (moving chunks between stages, encoding, answering
// the client) runs between them on the same cores, and a turn's holder
// that waits for a core holds its turn meanwhile. With a turn per core,
// omnistage bench's in-process pipeline at 8 requests at once on 2 cores
// used 170 % of them (190 % with every unit at once) and made 10 % fewer
// requests per second; with one turn more, 188 % and as many requests as
// every unit at once.
func NewDefault() *Scheduler { return New(runtime.GOMAXPROCS(0) + 1) }

// Turn is a turn held by one unit of work, used by one goroutine at a
// time.
type Turn struct {
	s    *Scheduler
	held bool
}

// Acquire waits for a turn for a unit of work due by deadline and returns
// it, or ctx's error.
func (s *Scheduler) Acquire(ctx context.Context, deadline time.Time) (*Turn, error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.mu.Unlock()
		return &Turn{s: s, held: true}, nil
	}
	w := s.enqueue(deadline)
	s.mu.Unlock()
	if err := s.wait(ctx, w); err != nil {
		return nil, err
	}
	return &Turn{s: s, held: true}, nil
}

// Yield gives the turn to the unit due first if it is due before deadline
// (the yielding unit's own) and waits for the turn back, by deadline as in
// Acquire; with no such unit waiting it returns at once. On ctx's error
// the turn is no longer held (End does nothing).
func (t *Turn) Yield(ctx context.Context, deadline time.Time) error {
	if !t.held {
		return nil
	}
	s := t.s
	s.mu.Lock()
	if len(s.waiting) == 0 || !s.waiting[0].deadline.Before(deadline) {
		s.mu.Unlock()
		return nil
	}
	next := heap.Pop(&s.waiting).(*waiter)
	close(next.ch)
	w := s.enqueue(deadline)
	s.mu.Unlock()
	if err := s.wait(ctx, w); err != nil {
		t.held = false
		return err
	}
	return nil
}

// End ends the turn: the unit due first, if any waits, takes it. Calling
// it again does nothing.
func (t *Turn) End() {
	if t.held {
		t.held = false
		t.s.release()
	}
}

// enqueue queues a waiter due by deadline; s.mu is held.
func (s *Scheduler) enqueue(deadline time.Time) *waiter {
	w := &waiter{deadline: deadline, seq: s.seq, ch: make(chan struct{})}
	s.seq++
	heap.Push(&s.waiting, w)
	return w
}

// wait waits until w is given a turn, or ctx ends: then w leaves the
// queue, or, if the turn was given as ctx ended, passes it on.
func (s *Scheduler) wait(ctx context.Context, w *waiter) error {
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&s.waiting, w.index)
			s.mu.Unlock()
			return ctx.Err()
		}
		s.mu.Unlock()
		s.release()
		return ctx.Err()
	}
}

// release ends a turn: the waiter due first, if any, takes it.
func (s *Scheduler) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	w := heap.Pop(&s.waiting).(*waiter)
	close(w.ch)
}

// Waiting returns the number of units waiting for a turn.
func (s *Scheduler) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

type waiter struct {
	deadline time.Time
	seq      uint64
	ch       chan struct{} // closed when the turn is given
	index    int           // in the heap; -1 once popped
}

// waitHeap orders waiters by deadline, then arrival.
type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if !h[i].deadline.Equal(h[j].deadline) {
		return h[i].deadline.Before(h[j].deadline)
	}
	return h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
