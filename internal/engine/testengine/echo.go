package testengine

// The echo engine: no options, no hooks, what comes in goes out.

import (
	"context"
	"errors"
	"io"

	"github.com/omnistage/omnistage/internal/engine"
)

// Echo is an engine that sends back every chunk it gets, unchanged, with
// no options, hooks or registry: the in-process baseline a benchmark
// measures a stage program against, or the engine a test's Go stage
// program serves.
type Echo struct{}

var _ engine.Engine = Echo{}

func (Echo) Warm(context.Context) error { return nil }
func (Echo) Close() error               { return nil }

func (Echo) Process(ctx context.Context, job *engine.Job) error {
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := job.Out.Send(ctx, c); err != nil {
			return err
		}
	}
}
