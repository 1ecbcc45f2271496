package loadgen

// The in-process driver: requests submitted to an orchestrator directly.

import (
	"context"
	"errors"
	"io"
	"strconv"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// InProcess drives an orchestrator in this process with the requests the
// speech endpoint would submit. The caller starts and shuts down the
// orchestrator.
type InProcess struct {
	o          *orchestrator.Orchestrator
	modalities []string
}

var _ Driver = (*InProcess)(nil)

// NewInProcess returns a driver for o; with timestamps, its requests ask
// for word timestamps too (their streams still count only the audio).
func NewInProcess(o *orchestrator.Orchestrator, timestamps bool) *InProcess {
	d := &InProcess{o: o, modalities: []string{string(engine.KindAudio)}}
	if timestamps {
		d.modalities = append(d.modalities, string(engine.KindTimestamps))
	}
	return d
}

// Start implements Driver.
func (d *InProcess) Start(ctx context.Context, id, text string) (Stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	st, err := d.o.Submit(sctx, orchestrator.Request{ID: id, Prompt: engine.Prompt{Text: text}, Modalities: d.modalities})
	if err != nil {
		cancel()
		return nil, inprocError(ctx, err)
	}
	return &inprocStream{st: st, cancel: cancel}, nil
}

// inprocError turns an orchestrator error into the driver's: ctx's own
// errors stay as they are, for the run to classify.
func inprocError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &Error{Code: string(orchestrator.CodeOf(err)), Msg: err.Error()}
}

type inprocStream struct {
	st     *orchestrator.Stream
	cancel context.CancelFunc
}

// Next implements Stream.
func (s *inprocStream) Next(ctx context.Context) (int, int, error) {
	for {
		out, err := s.st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return 0, 0, io.EOF
		}
		if err != nil {
			return 0, 0, inprocError(ctx, err)
		}
		if a := out.Chunk.Audio; a != nil {
			return len(a.Samples), a.SampleRate, nil
		}
	}
}

// Close implements Stream: cancelling the request's context aborts it as a
// client going away does; nothing waits for its drain.
func (s *inprocStream) Close() { s.cancel() }

// Abort implements Driver.
func (d *InProcess) Abort(ctx context.Context, id string) error {
	err := d.o.Abort(ctx, id)
	if err != nil && orchestrator.CodeOf(err) == orchestrator.CodeNotFound {
		return ErrNotFound
	}
	if err != nil {
		return inprocError(ctx, err)
	}
	return nil
}

// Held implements Driver.
func (d *InProcess) Held(ctx context.Context, id string) (bool, error) {
	_, held := d.o.Lookup(id)
	return held, nil
}

// Leaks implements Driver: the orchestrator's own count of requests in
// flight and bindings, what its metrics export.
func (d *InProcess) Leaks(ctx context.Context) (Leaks, error) {
	s := d.o.Stats()
	l := Leaks{InFlight: s.InFlight, Bindings: s.Bindings(), ByStage: map[string]int{}}
	for _, st := range s.Stages {
		l.ByStage[strconv.Itoa(st.ID)] = st.Bindings
	}
	return l, nil
}
