// Package testengine provides deterministic engines for testing the runtime,
// registered under names that start with "test-". They carry a trace of the
// stages a request went through as text in every chunk, whatever kind the
// stage declares, so a test can trace each output to its own input.
//
// Behaviour is set by deploy options:
//
//	chunks: N      emit N output chunks per input chunk (default 1)
//	split: true    split each input chunk's text on spaces, one output chunk per word
//	collect: true  read the whole input first, then emit one chunk of it joined
//	passthrough: true  forward input chunks unchanged (the no-op engine for benchmarks)
//	spans: true    carry units of work (engine.Span): the first output chunk of
//	               an input chunk carries its Span, or, when the input's first
//	               chunk has none, a Span numbering the input's chunks from 0
//	ends: true     after each input chunk's output, send an end-of-sentence
//	               mark (an Audio chunk without samples, engine.UnitEnds)
//	replay: deterministic  jobs can be replayed (engine.Replayer), and make the
//	               same output on every replica
//	replay: varying  jobs can be replayed, and each replica marks its output
//	               with its own id, as a sampling model's would differ
//
// and by Hooks, which a test passes to Register to observe, slow, fail or
// lose replicas.
package testengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
)

// Hooks let a test watch and steer the test engines. Every field may be nil.
// Hooks run on the engine's goroutines and must be safe for concurrent use.
type Hooks struct {
	// Warm is called by Warm.
	Warm func(e *Engine) error
	// Prepare is called by Prepare with the job's Upstream set.
	Prepare func(ctx context.Context, e *Engine, job *engine.Job) error
	// Process is called at the start of Process; an error fails the call.
	Process func(ctx context.Context, e *Engine, job *engine.Job) error
	// Chunk is called before each output chunk is sent; an error fails the call.
	Chunk func(ctx context.Context, e *Engine, job *engine.Job, n int) error
	// Close is called by Close.
	Close func(e *Engine)
}

// Options are the test engines' deploy options.
type Options struct {
	Chunks      int    `json:"chunks"`
	Split       bool   `json:"split"`
	Collect     bool   `json:"collect"`
	Passthrough bool   `json:"passthrough"`
	Spans       bool   `json:"spans"`
	Ends        bool   `json:"ends"`
	Replay      string `json:"replay"`
}

// Engine is one replica of a test engine.
type Engine struct {
	Spec  engine.Spec
	Name  string
	opts  Options
	hooks *Hooks

	loseOnce sync.Once
	lost     chan struct{}
}

var (
	_ engine.Engine        = (*Engine)(nil)
	_ engine.Preparer      = (*Engine)(nil)
	_ engine.Watcher       = (*Engine)(nil)
	_ engine.ParamsChecker = (*Engine)(nil)
	_ engine.Replayer      = (*Engine)(nil)
)

// Register registers a test engine under each name (each must start with
// "test-"), sharing hooks (which may be nil).
func Register(r *engine.Registry, hooks *Hooks, names ...string) {
	if hooks == nil {
		hooks = &Hooks{}
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "test-") {
			panic("testengine: name must start with test-: " + name)
		}
		r.Register(name, engine.Driver{
			DeployKeys: []string{"migrate"},
			New: func(spec engine.Spec) (engine.Engine, error) {
				var opts Options
				if err := spec.Options.Decode(&opts); err != nil {
					return nil, fmt.Errorf("%s options: %w", name, err)
				}
				if opts.Chunks == 0 {
					opts.Chunks = 1
				}
				switch opts.Replay {
				case "", "deterministic", "varying":
				default:
					return nil, fmt.Errorf("%s options: replay: %q is not deterministic or varying", name, opts.Replay)
				}
				return &Engine{Spec: spec, Name: name, opts: opts, hooks: hooks, lost: make(chan struct{})}, nil
			},
		})
	}
}

// ReplicaID returns the replica's id as the runtime names it ("name/index").
func (e *Engine) ReplicaID() string { return fmt.Sprintf("%s/%d", e.Spec.Name, e.Spec.Replica) }

// Lose marks the replica lost, as if its process had died.
func (e *Engine) Lose() { e.loseOnce.Do(func() { close(e.lost) }) }

// Lost implements engine.Watcher.
func (e *Engine) Lost() <-chan struct{} { return e.lost }

// Replay implements engine.Replayer, as the replay option says.
func (e *Engine) Replay() (engine.Replay, bool) {
	return engine.Replay{Deterministic: e.opts.Replay == "deterministic"}, e.opts.Replay != ""
}

// Warm implements engine.Engine.
func (e *Engine) Warm(ctx context.Context) error {
	if e.hooks.Warm != nil {
		return e.hooks.Warm(e)
	}
	return nil
}

// Prepare implements engine.Preparer.
func (e *Engine) Prepare(ctx context.Context, job *engine.Job) error {
	if e.hooks.Prepare != nil {
		return e.hooks.Prepare(ctx, e, job)
	}
	return nil
}

// Params are the test engines' per-request params.
type Params struct {
	// Tag is appended to each output chunk's trace.
	Tag string `json:"tag"`
	// Fail makes the call fail with an input error.
	Fail bool `json:"fail"`
}

// CheckParams implements engine.ParamsChecker.
func (e *Engine) CheckParams(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil // the defaults: nothing to check (and nothing to allocate)
	}
	var p Params
	return engine.DecodeParams(raw, &p)
}

// Process implements engine.Engine.
func (e *Engine) Process(ctx context.Context, job *engine.Job) error {
	select {
	case <-e.lost:
		return fmt.Errorf("%s: %w", e.ReplicaID(), engine.ErrReplicaLost)
	default:
	}
	if e.hooks.Process != nil {
		if err := e.hooks.Process(ctx, e, job); err != nil {
			return err
		}
	}
	var p Params
	if err := engine.DecodeParams(job.Params, &p); err != nil {
		return err
	}
	if p.Fail {
		return &engine.InputError{Reason: fmt.Sprintf("stage %d was asked to fail", job.StageID)}
	}
	mark := e.Spec.Name
	if p.Tag != "" {
		mark += "+" + p.Tag
	}
	if e.opts.Replay == "varying" {
		mark += "@" + e.ReplicaID()
	}
	n := 0
	var span *engine.Span // the unit the next output chunk begins, with spans
	emit := func(text string) error {
		if e.hooks.Chunk != nil {
			if err := e.hooks.Chunk(ctx, e, job, n); err != nil {
				return err
			}
		}
		n++
		c := engine.Chunk{Text: &engine.Text{Text: text}, Span: span}
		span = nil
		return job.Out.Send(ctx, c)
	}
	units := 0        // input chunks read
	numbered := false // the input carries no Spans: number its chunks
	if e.opts.Collect {
		chunks, err := engine.RecvAll(ctx, job.In)
		if err != nil {
			return err
		}
		parts := make([]string, len(chunks))
		for i, c := range chunks {
			parts[i] = textOf(c)
		}
		return emit(strings.Join(parts, " ") + "|" + mark)
	}
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if e.opts.Passthrough {
			if err := job.Out.Send(ctx, c); err != nil {
				return err
			}
			continue
		}
		if units == 0 {
			numbered = c.Span == nil
		}
		if e.opts.Spans {
			span = c.Span
			if numbered {
				span = &engine.Span{Sentence: units}
			}
		}
		units++
		if err := e.emitFor(textOf(c), mark, emit); err != nil {
			return err
		}
		if e.opts.Ends {
			if err := job.Out.Send(ctx, engine.Chunk{Audio: &engine.Audio{SampleRate: ToneRate, EndOfSentence: true}}); err != nil {
				return err
			}
		}
	}
}

// emitFor emits the output of one input chunk's text, in.
func (e *Engine) emitFor(in, mark string, emit func(string) error) error {
	if e.opts.Split {
		for _, w := range strings.Fields(in) {
			if err := emit(w + "|" + mark); err != nil {
				return err
			}
		}
		return nil
	}
	for k := range e.opts.Chunks {
		if err := emit(fmt.Sprintf("%s|%s.%d", in, mark, k)); err != nil {
			return err
		}
	}
	return nil
}

func textOf(c engine.Chunk) string {
	if c.Text != nil {
		return c.Text.Text
	}
	return ""
}

// Close implements engine.Engine.
func (e *Engine) Close() error {
	if e.hooks.Close != nil {
		e.hooks.Close(e)
	}
	return nil
}
