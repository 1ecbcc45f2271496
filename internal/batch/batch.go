// Package batch gathers the units of work that concurrent requests hand
// to one replica of a batching stage (engine.Batcher) into batches, the
// way Triton's dynamic batcher and Ray Serve's @serve.batch do.
//
// A Queue forms a batch once it holds Max items, or once its oldest item
// has waited Delay, whichever comes first; a lone request never waits
// longer than Delay for others to join it, and with Delay 0 not at all: a
// batch then holds what queued while the batches before it ran. Up to
// Workers batches run at once (an engine whose one call uses one core
// would otherwise leave the others idle under load). A batch takes the most urgent item first (its request's
// playback deadline, engine.Due: first audio still comes first), then
// the items whose sizes are closest to it (so that a batch of text lines
// of different widths pads little), the earlier due first among equals.
// Every item of one call runs before the call returns, so a request's
// results come back in its order. The batch runs in a turn on the CPU of
// its most urgent item's request: one unit of work to the scheduler.
//
// Its Workers goroutines run a Queue's batches while it holds items, and
// end when it is empty: a Queue needs no closing.
package batch

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// Options configure a Queue.
type Options struct {
	// Max is the most items a batch holds (at least 1).
	Max int
	// Delay is the longest the oldest item waits for a batch to fill.
	Delay time.Duration
	// Workers is the most batches that run at once (at least 1).
	Workers int
	// Observe, when set, hears of each batch: its size, and how long its
	// oldest item waited for it to begin. It must not block.
	Observe func(size int, wait time.Duration)
}

// Queue batches the items of one replica's engine.
type Queue struct {
	b    engine.Batcher
	opts Options

	mu      sync.Mutex
	waiting []*pending
	runners int           // runner goroutines on
	idle    int           // runners waiting for a batch to fill
	arrived chan struct{} // wakes a runner waiting for a batch to fill
	seq     uint64
}

// pending is one item waiting, or in a batch.
type pending struct {
	item    *engine.BatchItem
	call    *call
	due     time.Time
	arrived time.Time
	seq     uint64
}

// call is one Run: its items and how many are still to run.
type call struct {
	ctx  context.Context
	left int
	done chan struct{} // closed when left reaches 0
}

var _ engine.BatchRunner = (*Queue)(nil)

// New returns the Queue of b.
func New(b engine.Batcher, opts Options) *Queue {
	opts.Max, opts.Workers = max(opts.Max, 1), max(opts.Workers, 1)
	return &Queue{b: b, opts: opts, arrived: make(chan struct{}, 1)}
}

// Run implements engine.BatchRunner.
func (q *Queue) Run(ctx context.Context, items []*engine.BatchItem) error {
	if len(items) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &call{ctx: ctx, left: len(items), done: make(chan struct{})}
	due, ok := engine.Due(ctx)
	now := time.Now()
	if !ok {
		due = now
	}
	q.mu.Lock()
	for _, it := range items {
		q.seq++
		q.waiting = append(q.waiting, &pending{item: it, call: c, due: due, arrived: now, seq: q.seq})
	}
	switch {
	case q.idle > 0:
		select {
		case q.arrived <- struct{}{}:
		default:
		}
	case q.runners < q.opts.Workers:
		q.runners++
		go q.run()
	}
	q.mu.Unlock()
	select {
	case <-c.done:
		return ctx.Err()
	case <-ctx.Done():
	}
	// Items still waiting leave; those in a batch under way are waited
	// for, since the batch reads their inputs.
	q.mu.Lock()
	q.waiting = slices.DeleteFunc(q.waiting, func(p *pending) bool {
		if p.call == c {
			c.left--
			return true
		}
		return false
	})
	if c.left == 0 {
		close(c.done)
	}
	q.mu.Unlock()
	<-c.done
	return ctx.Err()
}

// run forms and runs batches until the queue is empty.
func (q *Queue) run() {
	for {
		batch, wait := q.next()
		if batch == nil {
			return
		}
		q.runBatch(batch, wait)
	}
}

// next waits for a batch to fill (Max items, or its oldest item waited
// Delay) and takes it out of the queue; nil once the queue is empty,
// when the runner ends.
func (q *Queue) next() ([]*pending, time.Duration) {
	q.mu.Lock()
	for {
		if len(q.waiting) == 0 {
			q.runners--
			q.mu.Unlock()
			return nil, 0
		}
		oldest := q.waiting[0].arrived
		for _, p := range q.waiting[1:] {
			if p.arrived.Before(oldest) {
				oldest = p.arrived
			}
		}
		left := q.opts.Delay - time.Since(oldest)
		if len(q.waiting) >= q.opts.Max || left <= 0 {
			batch := q.take()
			q.mu.Unlock()
			return batch, time.Since(oldest)
		}
		q.idle++
		q.mu.Unlock()
		t := time.NewTimer(left)
		select {
		case <-q.arrived:
		case <-t.C:
		}
		t.Stop()
		q.mu.Lock()
		q.idle--
	}
}

// take removes a batch from the waiting items: the most urgent, then
// those closest to it in size, the more urgent first among equals. q.mu
// is held.
func (q *Queue) take() []*pending {
	slices.SortFunc(q.waiting, urgency)
	head := q.waiting[0]
	rest := slices.Clone(q.waiting[1:])
	slices.SortStableFunc(rest, func(a, b *pending) int {
		return cmp.Compare(distance(a.item.Size, head.item.Size), distance(b.item.Size, head.item.Size))
	})
	n := min(q.opts.Max, len(q.waiting))
	batch := append([]*pending{head}, rest[:n-1]...)
	taken := make(map[*pending]bool, n)
	for _, p := range batch {
		taken[p] = true
	}
	q.waiting = slices.DeleteFunc(q.waiting, func(p *pending) bool { return taken[p] })
	return batch
}

// urgency orders items by due time, then arrival.
func urgency(a, b *pending) int {
	if c := a.due.Compare(b.due); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

func distance(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// runBatch runs batch in a turn of its most urgent live item's request,
// and hands each item back to its call.
func (q *Queue) runBatch(batch []*pending, wait time.Duration) {
	items := make([]*engine.BatchItem, 0, len(batch))
	var turn engine.CPUTurn
	var turnCtx context.Context
	for _, p := range batch {
		if p.call.ctx.Err() != nil {
			continue
		}
		if turn == nil {
			t, err := engine.Turn(p.call.ctx)
			if err != nil {
				continue // its request ended while it waited for the turn
			}
			turn, turnCtx = t, p.call.ctx
		}
		items = append(items, p.item)
	}
	if turn != nil {
		if q.opts.Observe != nil {
			q.opts.Observe(len(items), wait)
		}
		if err := q.b.RunBatch(context.WithoutCancel(turnCtx), items); err != nil {
			for _, it := range items {
				it.Err = err
			}
		}
		turn.End()
	}
	q.mu.Lock()
	for _, p := range batch {
		if p.call.left--; p.call.left == 0 {
			close(p.call.done)
		}
	}
	q.mu.Unlock()
}
