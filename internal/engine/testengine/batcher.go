package testengine

// Batcher: a test engine whose units of work run in batches across
// requests.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
)

// Batcher is a test engine that batches (engine.Batcher): every word of
// every input text chunk is one unit of work, upper-cased in a batch; a
// word "bad" is a unit that fails alone (its request fails with an
// *engine.InputError). Each input chunk's words go out as one text
// chunk, in order. Batches records the sizes of the batches it ran.
type Batcher struct {
	Spec engine.Spec

	mu      sync.Mutex
	batches []int
}

var (
	_ engine.Engine  = (*Batcher)(nil)
	_ engine.Batcher = (*Batcher)(nil)
)

// RegisterBatcher registers a batching test engine under each name (each
// must start with "test-"); it takes the deploy keys max_batch and
// max_batch_delay, and no options. made, when not nil, is called with
// each replica built.
func RegisterBatcher(r *engine.Registry, made func(*Batcher), names ...string) {
	for _, name := range names {
		if !strings.HasPrefix(name, "test-") {
			panic("testengine: name must start with test-: " + name)
		}
		r.Register(name, engine.Driver{
			DeployKeys: []string{"max_batch", "max_batch_delay"},
			New: func(spec engine.Spec) (engine.Engine, error) {
				var none struct{}
				if err := spec.Options.Decode(&none); err != nil {
					return nil, fmt.Errorf("%s options: %w", name, err)
				}
				b := &Batcher{Spec: spec}
				if made != nil {
					made(b)
				}
				return b, nil
			},
		})
	}
}

// Sizes returns the sizes of the batches run so far.
func (b *Batcher) Sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.batches...)
}

// Warm implements engine.Engine.
func (b *Batcher) Warm(ctx context.Context) error { return nil }

// Process implements engine.Engine.
func (b *Batcher) Process(ctx context.Context, job *engine.Job) error {
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		words := strings.Fields(textOf(c))
		items := make([]*engine.BatchItem, len(words))
		for i, w := range words {
			items[i] = &engine.BatchItem{Input: w, Size: len(w)}
		}
		if err := engine.RunBatched(ctx, b, items); err != nil {
			return err
		}
		out := make([]string, len(items))
		for i, it := range items {
			if it.Err != nil {
				return it.Err
			}
			out[i] = it.Output.(string)
		}
		if err := job.Out.Send(ctx, engine.Chunk{Text: &engine.Text{Text: strings.Join(out, " ")}}); err != nil {
			return err
		}
	}
}

// RunBatch implements engine.Batcher.
func (b *Batcher) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	b.mu.Lock()
	b.batches = append(b.batches, len(items))
	b.mu.Unlock()
	for _, it := range items {
		w := it.Input.(string)
		if w == "bad" {
			it.Err = &engine.InputError{Reason: `the word "bad"`}
			continue
		}
		it.Output = strings.ToUpper(w)
	}
	return nil
}

// Close implements engine.Engine.
func (b *Batcher) Close() error { return nil }
