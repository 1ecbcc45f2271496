package engine

// Batches: the units of work of several requests computed in one call.

import (
	"context"
	"time"
)

// Batcher is implemented by engines that can compute units of work of
// several requests in one call (a neural model run on a batch: on a CPU
// it saves a call's overhead per item, on a GPU it is the main lever).
// The engine's Process hands its units to RunBatched instead of
// computing them itself; the runtime gathers the units that concurrent
// requests hand to one replica into batches (of at most the stage's
// max_batch items, waiting at most its max_batch_delay for more) and
// calls RunBatch with each, one batch at a time per replica, in a turn
// on the CPU of the most urgent item's request.
//
// RunBatch computes every item: it sets each one's Output, or its Err
// when that item alone cannot be computed (its request fails, the other
// items' do not). A returned error fails every item of the batch: it is
// the server's failure, never an item's input's fault. Items of a batch
// may belong to different requests; RunBatch must not keep them after it
// returns. Its ctx carries no request's cancellation: a batch, once
// begun, runs to its end, and the items of requests that have ended are
// then dropped.
type Batcher interface {
	RunBatch(ctx context.Context, items []*BatchItem) error
}

// BatchItem is one unit of work of one request.
type BatchItem struct {
	// Input is the unit's input, of the engine's own type; read-only.
	Input any
	// Size groups items into batches that pad little: items of close
	// sizes go together (a text line's width, for a model that pads a
	// batch to its widest item). Zero for an engine whose inputs all have
	// one size.
	Size int
	// Output and Err are what RunBatch sets.
	Output any
	Err    error
}

// BatchRunner runs items in batches for one replica (package batch's
// Queue): it returns once every item has run (each Output or Err set),
// or, with ctx's error, once ctx ends and no batch in progress holds an
// item of the call.
type BatchRunner interface {
	Run(ctx context.Context, items []*BatchItem) error
}

type batchKey struct{}

// WithBatches returns ctx carrying the runner of the replica whose
// Process gets ctx.
func WithBatches(ctx context.Context, r BatchRunner) context.Context {
	return context.WithValue(ctx, batchKey{}, r)
}

// RunBatched computes items with b, the engine of the replica whose
// Process got ctx: in batches the runtime gathers across the replica's
// requests when it batches the stage, else at once in one call of
// RunBatch in a turn of its own. It returns once every item has run, or
// ctx's error; an item's own failure is its Err.
func RunBatched(ctx context.Context, b Batcher, items []*BatchItem) error {
	if len(items) == 0 {
		return nil
	}
	if r, ok := ctx.Value(batchKey{}).(BatchRunner); ok {
		return r.Run(ctx, items)
	}
	turn, err := Turn(ctx)
	if err != nil {
		return err
	}
	defer turn.End()
	if err := b.RunBatch(context.WithoutCancel(ctx), items); err != nil {
		return err
	}
	return ctx.Err()
}

// A Duer is a Turner that can tell when a request's units are due, so
// that a batch takes the most urgent items first.
type Duer interface {
	Due(ctx context.Context) time.Time
}

// Due returns when ctx's request's units are due, if its Turner can tell.
func Due(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Value(turnerKey{}).(Duer)
	if !ok {
		return time.Time{}, false
	}
	return d.Due(ctx), true
}
