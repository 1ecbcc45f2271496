// Package membudget bounds the memory that the calls a server has in
// progress hold at once. Each call takes its part from a Budget before it
// allocates and gives it back when done; a call that cannot take its part
// within the budget's longest wait is refused with a *BusyError, which
// package orchestrator classifies as overloaded (503, retryable).
package membudget

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
)

// Budget is a bound on the bytes that its takers hold at once. It is safe
// for concurrent use.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
}

// New returns a budget of size bytes whose takers wait at most wait for
// their part.
func New(size int64, wait time.Duration) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size, wait: wait}
}

// Take takes n bytes from b, at most b's size (a part larger than the
// whole budget takes all of it), and returns the function that gives them
// back, to be called once. While b has too little free it waits, at most
// b's longest wait; then it returns a *BusyError whose message names the
// takers as what ("/v1/run bodies"), or ctx's error when ctx ended first.
func (b *Budget) Take(ctx context.Context, n int64, what string) (release func(), err error) {
	n = min(n, b.size)
	if !b.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, b.wait)
		defer cancel()
		if err := b.sem.Acquire(wctx, n); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &BusyError{What: what, Size: b.size}
		}
	}
	return func() { b.sem.Release(n) }, nil
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
