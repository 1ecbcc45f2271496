package orchestrator

// The client side of a request: the Stream of its selected outputs, as
// they are produced, and its stages' timeline.

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// OutputChunk is one chunk of a selected output, as Stream.Recv returns it.
// Kind is the kind of the stage's output: the modality selected, or, for
// text selected of a stage whose output is regions, regions (the stage's
// output may serve two modalities; see pipeline.Route.Select).
type OutputChunk struct {
	Stage int
	Kind  engine.Kind
	Chunk engine.Chunk
	// Final is true for the final stage's output, false for the
	// intermediate outputs the request also selected.
	Final bool
}

// Stream is the outputs of one request, in the order its stages produced
// them.
type Stream struct {
	rq *request
}

// ID returns the request's id.
func (s *Stream) ID() string { return s.rq.id }

// Selection returns what the request runs and returns.
func (s *Stream) Selection() *pipeline.Selection { return s.rq.sel }

// StageTiming is one stage's part of a request, in milliseconds since it
// was submitted: when a replica was bound (the wait for one included),
// when the engine started, sent its first output (-1 if it sent none)
// and returned. The API renders it as apijson.StageTiming.
type StageTiming struct {
	Stage                                  int
	Name, Replica                          string
	BoundMs, StartMs, FirstOutputMs, EndMs float64
}

// Timings returns the timeline of each stage of the request, in route
// order, once the request has ended (Recv returned io.EOF or an error);
// nil before.
func (s *Stream) Timings() []StageTiming {
	rq := s.rq
	select {
	case <-rq.done:
	default:
		return nil
	}
	ms := func(t time.Time) float64 { return float64(t.Sub(rq.submitted).Microseconds()) / 1000 }
	out := make([]StageTiming, len(rq.bindings))
	for i := range rq.bindings {
		b := &rq.bindings[i]
		first := -1.0
		if n := b.first.Load(); n != 0 {
			first = ms(rq.submitted.Add(time.Duration(n - 1)))
		}
		out[i] = StageTiming{Stage: b.job.StageID, Name: b.stage.name, Replica: b.replica.ID,
			BoundMs: ms(b.bound), StartMs: ms(b.started), FirstOutputMs: first, EndMs: ms(b.ended)}
	}
	return out
}

// Recv returns the next output. It returns io.EOF once every selected output
// is complete and the request has fully ended (bindings released, id free),
// or the request's error if it failed or was aborted.
func (s *Stream) Recv(ctx context.Context) (OutputChunk, error) {
	// An output already waiting wins over a context done at the same time.
	select {
	case out, ok := <-s.rq.out:
		return s.received(out, ok)
	default:
	}
	select {
	case out, ok := <-s.rq.out:
		return s.received(out, ok)
	case <-ctx.Done():
		return OutputChunk{}, ctx.Err()
	}
}

// received is Recv's answer for a receive from the output channel.
func (s *Stream) received(out OutputChunk, ok bool) (OutputChunk, error) {
	switch {
	case ok:
		return out, nil
	case s.rq.err != nil:
		return OutputChunk{}, s.rq.err
	default:
		return OutputChunk{}, io.EOF
	}
}

// Buffered returns the number of outputs that Recv can return without
// waiting: a caller that writes them out may flush once they are taken.
func (s *Stream) Buffered() int { return len(s.rq.out) }

// Output is one selected output, complete: Kind is the modality selected,
// and Chunks the output of the stage that serves it.
type Output struct {
	Stage  int
	Kind   engine.Kind
	Final  bool
	Chunks []engine.Chunk
}

// Collect reads the stream to its end and returns every selected output,
// in route order, with its chunks in the order they were produced.
func (s *Stream) Collect(ctx context.Context) ([]Output, error) {
	outs := make([]Output, len(s.rq.sel.Outputs))
	for i, o := range s.rq.sel.Outputs {
		outs[i] = Output{Stage: o.Stage, Kind: o.Kind, Final: o.Stage == s.rq.sel.Final}
	}
	for {
		o, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return outs, nil
		}
		if err != nil {
			return nil, err
		}
		for i := range outs {
			if outs[i].Stage == o.Stage {
				outs[i].Chunks = append(outs[i].Chunks, o.Chunk)
			}
		}
	}
}

// Done is closed when the request has fully ended.
func (s *Stream) Done() <-chan struct{} { return s.rq.done }

// Err returns the request's outcome once Done is closed: nil on success.
func (s *Stream) Err() error {
	<-s.rq.done
	return s.rq.err
}

// Close aborts the request if it is still running and waits for it to end.
// It is safe to call after the stream ended and more than once.
func (s *Stream) Close() {
	select {
	case <-s.rq.done:
		return
	default:
	}
	s.rq.abort(errClientGone)
	// Nobody reads the stream any more: drain it so stages are not blocked.
	for range s.rq.out {
		s.rq.o.metrics.lateDropped.Inc()
	}
}
