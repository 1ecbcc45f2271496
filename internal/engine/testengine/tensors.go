package testengine

// Tensors: a test engine that turns a request's text into tensor chunks,
// for testing the stages that take them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// Tensors is a test engine that takes text and gives tensor chunks: each
// input text chunk goes out as the chunks Make returns for its text, in
// order (an error from Make fails the request).
type Tensors struct {
	Make func(text string) ([]engine.Tensors, error)
}

var _ engine.Engine = (*Tensors)(nil)

// RegisterTensors registers a tensor-making test engine under each name
// (each must start with "test-"), whose replicas make their chunks with
// makeChunks; it takes no options.
func RegisterTensors(r *engine.Registry, makeChunks func(text string) ([]engine.Tensors, error), names ...string) {
	for _, name := range names {
		if !strings.HasPrefix(name, "test-") {
			panic("testengine: name must start with test-: " + name)
		}
		r.Register(name, engine.Driver{
			New: func(spec engine.Spec) (engine.Engine, error) {
				var none struct{}
				if err := spec.Options.Decode(&none); err != nil {
					return nil, fmt.Errorf("%s options: %w", name, err)
				}
				return &Tensors{Make: makeChunks}, nil
			},
		})
	}
}

// Warm implements engine.Engine.
func (e *Tensors) Warm(ctx context.Context) error { return nil }

// Process implements engine.Engine.
func (e *Tensors) Process(ctx context.Context, job *engine.Job) error {
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		chunks, err := e.Make(textOf(c))
		if err != nil {
			return err
		}
		for i := range chunks {
			if err := job.Out.Send(ctx, engine.Chunk{Tensors: &chunks[i]}); err != nil {
				return err
			}
		}
	}
}

// Close implements engine.Engine.
func (e *Tensors) Close() error { return nil }
