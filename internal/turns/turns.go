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
// that have audio in hand (their deadline is when that audio runs out),
// and a stream whose audio runs low comes back to the front before its
// listener hears a gap.
//
// # The scheduler
//
// A Scheduler has a number of turns that may run at once (the cores it
// may use: GOMAXPROCS); Acquire waits for a free one, earliest deadline
// first, ties in arrival order. A turn must not wait for anything but the
// CPU (no Send, no Recv): a turn held across a wait would stall the other
// requests.
package turns

import (
	"container/heap"
	"context"
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

// Acquire waits for a turn for a unit of work due by deadline and returns
// the function that ends the turn (call it once), or ctx's error.
func (s *Scheduler) Acquire(ctx context.Context, deadline time.Time) (func(), error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.mu.Unlock()
		return s.release, nil
	}
	w := &waiter{deadline: deadline, seq: s.seq, ch: make(chan struct{})}
	s.seq++
	heap.Push(&s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.ch:
		return s.release, nil
	case <-ctx.Done():
		s.mu.Lock()
		if w.index >= 0 {
			heap.Remove(&s.waiting, w.index)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Unlock()
		// The turn was given as ctx ended: pass it on.
		s.release()
		return nil, ctx.Err()
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
