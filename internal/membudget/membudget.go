// Package membudget bounds the memory that the calls a server has in
// progress hold at once. Each call takes its part from a Budget before it
// allocates (Take, or a Hold that it grows as it learns what it needs) and
// gives it back when done; a call that cannot take its part within the
// budget's longest wait is refused with a *BusyError, which package
// orchestrator classifies as overloaded (503, retryable). A budget can
// also say when it starts and stops being used (Options.Idle), so that the
// memory of calls that never reached a request (bodies refused as they
// were read) is trimmed like a request's.
package membudget

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// IdleObserver hears when a Budget's first part is taken while none is
// held (Busy) and when its last part held is given back (Idle); the calls
// alternate, Busy first, and must not block. A *memtrim.Trimmer is one.
type IdleObserver interface {
	Busy()
	Idle()
}

// Budget is a bound on the bytes that its takers hold at once. It is safe
// for concurrent use. Its takers wait in turn; a hold that grows (one that
// already holds a part) goes before the calls that take their first part,
// since the memory they wait for may be its own: a call that has begun to
// read a body does not wait behind the bodies not yet begun.
type Budget struct {
	size int64
	wait time.Duration
	obs  IdleObserver

	mu      sync.Mutex
	free    int64
	holds   int       // the holds that hold a part
	waiters []*waiter // in turn: growing holds first, then first parts
}

// waiter is a Grow waiting for its part.
type waiter struct {
	h     *Hold
	n     int64
	ready chan struct{} // closed once the part is h's
}

// New returns a budget of size bytes whose takers wait at most wait for
// their part; obs, when not nil, hears when the budget starts and stops
// being used.
func New(size int64, wait time.Duration, obs IdleObserver) *Budget {
	return &Budget{size: size, free: size, wait: wait, obs: obs}
}

// Take takes n bytes from b, at most b's size (a part larger than the
// whole budget takes all of it), and returns the function that gives them
// back, to be called once. While b has too little free it waits, at most
// b's longest wait; then it returns a *BusyError whose message names the
// takers as what ("/v1/run bodies"), or ctx's error when ctx ended first.
func (b *Budget) Take(ctx context.Context, n int64, what string) (release func(), err error) {
	h := b.Hold(what)
	if err := h.Grow(ctx, n); err != nil {
		return nil, err
	}
	return h.Release, nil
}

// Hold returns an empty part of b for one call, whose takers what names
// in a busy error; the call grows it (Grow) before it allocates, and gives
// it back with Release.
func (b *Budget) Hold(what string) *Hold { return &Hold{b: b, what: what} }

// Hold is the part of a Budget that one call holds. Its methods must not
// be called concurrently.
type Hold struct {
	b    *Budget
	what string
	n    int64
}

// Grow takes n more bytes for h, as Take does: it waits while the budget
// has too little free, at most the budget's longest wait, and returns a
// *BusyError past it or ctx's error when ctx ended first, holding what it
// held before. A hold never holds more than the whole budget: what it
// asks beyond that is not taken.
func (h *Hold) Grow(ctx context.Context, n int64) error {
	b := h.b
	n = min(n, b.size-h.n)
	if n <= 0 {
		return nil
	}
	w := &waiter{h: h, n: n, ready: make(chan struct{})}
	b.mu.Lock()
	b.enqueue(w)
	b.grant()
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	default:
	}
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = &BusyError{What: h.what, Size: b.size}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile
		return nil
	default:
	}
	b.waiters = slices.DeleteFunc(b.waiters, func(o *waiter) bool { return o == w })
	b.grant() // the waiters behind w may fit
	return err
}

// enqueue puts w in turn: after the growing holds when it grows one,
// else last.
func (b *Budget) enqueue(w *waiter) {
	if w.h.n == 0 {
		b.waiters = append(b.waiters, w)
		return
	}
	i := 0
	for i < len(b.waiters) && b.waiters[i].h.n > 0 {
		i++
	}
	b.waiters = slices.Insert(b.waiters, i, w)
}

// grant gives the waiters their parts, in turn, while the first fits.
func (b *Budget) grant() {
	for len(b.waiters) > 0 && b.waiters[0].n <= b.free {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.free -= w.n
		if w.h.n == 0 {
			b.holds++
			if b.holds == 1 && b.obs != nil {
				b.obs.Busy()
			}
		}
		w.h.n += w.n
		close(w.ready)
	}
}

// Size returns the bytes h holds.
func (h *Hold) Size() int64 { return h.n }

// Release gives back everything h holds; h is empty after it, and may
// grow again.
func (h *Hold) Release() {
	if h.n == 0 {
		return
	}
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += h.n
	h.n = 0
	b.holds--
	if b.holds == 0 && b.obs != nil {
		b.obs.Idle()
	}
	b.grant()
}

// Held returns the bytes that b's takers hold now.
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.free
}

// BusyError is a Take refused because the budget stayed full for its
// longest wait: the server is overloaded, and the call may be retried.
type BusyError struct {
	// What names the takers in the message: "/v1/run bodies".
	What string
	// Size is the budget's bound in bytes.
	Size int64
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("server busy: the %s in progress hold all of its %d MiB for them; retry later", e.What, e.Size>>20)
}
