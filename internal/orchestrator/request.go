package orchestrator

// The life of one request: submission, binding to one replica per stage,
// a task per stage, and the end that releases everything.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/pool"
)

// Request is what a caller submits: a request that runs the route's
// prefix up to the outputs it selects.
type Request struct {
	// ID is the caller's request id; empty means generate one.
	ID string
	// Prompt is the input the route's entry stage takes: its text, for a
	// pipeline whose input is text.
	Prompt engine.Prompt
	// Image is the input of a pipeline whose input is an image: the entry
	// stage receives it as one Image chunk, and the prompt's text is
	// empty (later stages learn the text from the stages before them).
	Image *engine.Image
	// Modalities selects the outputs; empty means the route tail's type.
	Modalities []string
	// Params holds per-stage sampling params indexed by stage id (the
	// aligner's at the pipeline's stage count); nil entries mean defaults.
	Params []json.RawMessage
	// Input, when set, streams the request's text instead of Prompt.Text
	// (which must then be empty): the entry stage receives its Text chunks
	// as they come, until io.EOF, and every stage's Prompt.Feed holds the
	// text so far (Prompt.Feed, when the caller sets it, is the feed the
	// runtime fills, so that the caller reads the text taken so far from
	// it rather than keep a copy). Its Recv must return promptly once its
	// ctx is cancelled; the request may stop reading it before its end
	// (when it fails or is aborted).
	Input engine.Source
}

// StageCall is one stage of the route run alone, on an input handed over
// by its upstream (one POST /v1/run): its output is the call's final
// output. A stage call does not claim its ID (see the package
// documentation).
type StageCall struct {
	// ID is the id of the request the call belongs to; empty means
	// generate one.
	ID string
	// Stage is the stage to run; it must be on the route.
	Stage int
	// Prompt is the request's original input, for stages that need it
	// (the aligner's transcript).
	Prompt engine.Prompt
	// Params are the request's sampling params, as in Request.
	Params []json.RawMessage
	// Input yields the stage's input as the caller receives it. Its Recv
	// must return promptly once its ctx is cancelled. The stage may stop
	// reading it before its end (when it fails or the request is aborted):
	// what is left is the caller's to discard.
	Input engine.Source
}

// binding is one stage of a request: the replica it is bound to, its job,
// and the ends of its streams (kept here so that a request allocates them
// at once).
type binding struct {
	stage   *stageRun
	replica *pool.Replica
	// holder holds the binding: the request, or, where the stage lets
	// the request move to another replica, mig.
	holder pool.Holder
	mig    *migration
	job    engine.Job
	sink   stageSink
	src    chanSource // the next stage's input, when there is one

	// The stage's timeline (Stream.Timings): bound when bind got its
	// replica, started and ended around Process (written by its task), first
	// when it sent its first chunk (nanoseconds after the submission, plus
	// one, on the monotonic clock, by whatever goroutine sent).
	bound, started, ended time.Time
	first                 atomic.Int64

	span trace.Span // the stage's span; nil when tracing is off

	// noted is rq.ctx holding noter, set once by processCtx.
	noted engine.NoterContext
	noter stageNoter
}

// submission is a Request or a StageCall, checked against the route.
type submission struct {
	id     string
	prompt engine.Prompt
	params []json.RawMessage
	sel    *pipeline.Selection
	// input is a stage call's input, or a streamed request's; nil for a
	// request whose entry stage takes the prompt.
	input     engine.Source
	stageCall bool
}

// request is one admitted request or stage call. Its fields are set before
// its tasks start and read-only afterwards, except where noted.
type request struct {
	o      *Orchestrator
	id     string
	sel    *pipeline.Selection
	ctx    context.Context
	cancel context.CancelCauseFunc

	stageCall    bool // a StageCall: it does not claim its id
	bindings     []binding
	out          chan OutputChunk
	pending      atomic.Int32 // stage tasks not yet returned
	state        atomic.Int32
	stopOnClient func() bool

	prompt    engine.SliceSource // the entry stage's input, unless a stage call
	stream    Stream             // what Submit returns
	submitted time.Time

	// When tracing: the ctx holding the span the stage spans are children
	// of, and the request's own span (nil for a stage call).
	traceCtx context.Context
	span     trace.Span

	// The audio delivered to the listener (turns.go): when the first of
	// it went (nanoseconds after submission, plus one; 0 before), and its
	// length in nanoseconds.
	firstAudio, audioOut atomic.Int64
	// migrations counts the moves of its stages to other replicas.
	migrations atomic.Int32

	notes notes // what its stages note (engine.Note)

	abortedAt atomic.Int64  // unix nanos of the first abort, for the drain-time metric
	done      chan struct{} // closed when the request has fully ended
	err       error         // the outcome; written before done closes
}

// ReplicaLost implements pool.Holder: a bound replica is gone, so the
// request fails with an error naming it.
func (rq *request) ReplicaLost(r *pool.Replica, cause error) {
	rq.cancel(&ReplicaLostError{Stage: r.Stage, Name: rq.o.cfg.StageName(r.Stage), Replica: r.ID, Err: cause})
}

// Submit admits a request and starts it. It returns once the request is
// bound to a replica of every stage it needs (waiting in a stage's queue if
// all its replicas are busy) and its stages are running. Cancelling ctx at
// any time aborts the request. The caller reads the Stream to its end, or
// calls Stream.Close.
func (o *Orchestrator) Submit(ctx context.Context, req Request) (*Stream, error) {
	if err := o.checkReady(); err != nil {
		return nil, err
	}
	sel, err := o.route.Select(req.Modalities)
	if err != nil {
		return nil, err
	}
	sub := submission{id: req.ID, prompt: req.Prompt, params: req.Params, sel: sel}
	if err := o.checkInputKind(req); err != nil {
		return nil, err
	}
	switch {
	case req.Image != nil:
		sub.input = engine.NewSliceSource(engine.Chunk{Image: req.Image})
	case req.Input == nil:
		if err := o.checkPrompt(sel, req.Prompt.Text, req.Params); err != nil {
			return nil, err
		}
	default:
		if req.Prompt.Text != "" {
			return nil, newError(CodeBadRequest, "a streamed request takes its text from its input only, not also from its prompt")
		}
		if sub.prompt.Feed == nil {
			sub.prompt.Feed = engine.NewFeed()
		}
		sub.input = engine.Feeding(req.Input, sub.prompt.Feed)
	}
	return o.submit(ctx, sub)
}

// SubmitStage admits a stage call and starts it, as Submit does a
// request; its Stream returns the stage's output, as its final output.
func (o *Orchestrator) SubmitStage(ctx context.Context, call StageCall) (*Stream, error) {
	if err := o.checkReady(); err != nil {
		return nil, err
	}
	sel, err := o.route.Only(call.Stage)
	if err != nil {
		return nil, err
	}
	return o.submit(ctx, submission{id: call.ID, prompt: call.Prompt, params: call.Params, sel: sel, input: call.Input, stageCall: true})
}

func (o *Orchestrator) checkReady() error {
	if !o.ready.Load() {
		return newError(CodeUnavailable, "pipeline %s is not ready", o.cfg.Pipeline.Name)
	}
	return nil
}

// submit checks, admits, binds and starts sub.
func (o *Orchestrator) submit(ctx context.Context, sub submission) (*Stream, error) {
	if err := o.CheckParams(sub.sel, sub.params); err != nil {
		return nil, err
	}
	for _, id := range sub.sel.Stages {
		if o.stages[id] == nil {
			return nil, newError(CodeUnavailable, "stage %d (%s) is not served here", id, o.cfg.StageName(id))
		}
	}
	if sub.id == "" {
		sub.id = o.newID()
	} else if err := checkID(sub.id); err != nil {
		return nil, err
	}
	rq := &request{o: o, id: sub.id, sel: sub.sel, stageCall: sub.stageCall,
		out: make(chan OutputChunk, o.cfg.Deploy.StreamBuffer), done: make(chan struct{}), submitted: time.Now()}
	base := context.Background()
	if o.opts.Turns != nil {
		base = engine.WithTurner(base, requestTurns{rq})
	}
	rq.ctx, rq.cancel = context.WithCancelCause(base)
	if err := o.admit(rq); err != nil {
		rq.cancel(err)
		return nil, err
	}
	rq.startRequestSpan(ctx)
	rq.stopOnClient = noClient
	if ctx.Done() != nil {
		rq.stopOnClient = context.AfterFunc(ctx, func() {
			cause := errClientGone
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				cause = &Error{Code: CodeDeadline, Msg: "request deadline exceeded", Err: ctx.Err()}
			}
			rq.abort(cause)
		})
	}
	if err := rq.bind(&sub); err != nil {
		rq.cancel(err)
		rq.finish()
		return nil, rq.err
	}
	rq.start(sub.input)
	rq.stream.rq = rq
	return &rq.stream, nil
}

// noClient is stopOnClient for a ctx that is never cancelled.
func noClient() bool { return false }

// checkInputKind refuses a request whose input is not the kind the
// pipeline takes: an image for a pipeline of text, or text for one of
// images.
func (o *Orchestrator) checkInputKind(req Request) error {
	name, want := o.cfg.Pipeline.Name, o.cfg.Pipeline.Input
	switch {
	case want == engine.KindImage && req.Image == nil:
		return newError(CodeBadRequest, "pipeline %s reads an image: send an image, not text", name)
	case want == engine.KindImage && (req.Prompt.Text != "" || req.Input != nil):
		return newError(CodeBadRequest, "pipeline %s reads an image: send the image alone, without text", name)
	case want != engine.KindImage && req.Image != nil:
		return newError(CodeBadRequest, "pipeline %s takes %s, not an image", name, want)
	}
	return nil
}

// checkPrompt asks the entry stage's engine, when it runs here, whether
// it can take the request's text (engine.PromptChecker): a text it has
// nothing of to speak is refused before any stage runs.
func (o *Orchestrator) checkPrompt(sel *pipeline.Selection, text string, params []json.RawMessage) error {
	id := sel.Stages[0]
	st := o.stages[id]
	if st == nil {
		return nil
	}
	c := st.promptChecker()
	if c == nil {
		return nil
	}
	if err := c.CheckPrompt(text, paramAt(params, id)); err != nil {
		return fmt.Errorf("stage %d (%s): %w", id, st.name, err)
	}
	return nil
}

// CheckParams checks a request's sampling params for sel, the way
// pipeline.Selection.CheckParams orders it: each entry's value first, then
// the array's length. Each entry given is checked by its stage's engine
// (engine.ParamsChecker) wherever that engine runs here, whether or not
// the request runs the stage: the stages the route skips and an
// audio-only request's aligner included. Stages not served here are left
// to their own server.
func (o *Orchestrator) CheckParams(sel *pipeline.Selection, params []json.RawMessage) error {
	return sel.CheckParams(params, o.checkStageParams)
}

// checkStageParams is the pipeline.ParamsCheck of the stages served here.
func (o *Orchestrator) checkStageParams(id int, params json.RawMessage) error {
	if id >= len(o.stages) || o.stages[id] == nil {
		return nil
	}
	checker := o.stages[id].checker()
	if checker == nil {
		return nil
	}
	if err := checker.CheckParams(params); err != nil {
		return fmt.Errorf("sampling_params[%d]: stage %d (%s): %w", id, id, o.cfg.StageName(id), err)
	}
	return nil
}

func paramAt(params []json.RawMessage, id int) json.RawMessage {
	if id < len(params) {
		return params[id]
	}
	return nil
}

// bind binds rq to a replica of every stage on its route prefix, in route
// order, preparing each receiver after its producer is bound.
func (rq *request) bind(sub *submission) error {
	o := rq.o
	rq.bindings = make([]binding, 0, len(rq.sel.Stages))
	for i, id := range rq.sel.Stages {
		st := o.stages[id]
		span := rq.startStageSpan(id, st.name)
		var asked time.Time // for the span's queue wait
		if span != nil {
			asked = time.Now()
		}
		holder, mig := rq.holderFor(st)
		r, err := st.pool.Acquire(rq.ctx, holder)
		if err != nil {
			err = rq.bindError(id, err)
			failSpan(span, err)
			return err
		}
		rq.bindings = append(rq.bindings, binding{stage: st, replica: r, holder: holder, mig: mig, bound: time.Now(), span: span, job: engine.Job{
			RequestID: rq.id, StageID: id, Params: paramAt(sub.params, id), Prompt: sub.prompt,
		}})
		bb := &rq.bindings[i]
		bb.boundEvent(asked)
		if i > 0 {
			if err := rq.prepare(bb, rq.bindings[i-1].replica.ID); err != nil {
				return err
			}
		}
		if cause := context.Cause(rq.ctx); cause != nil {
			return cause
		}
	}
	return nil
}

// prepare tells b's replica, once its producer's replica (upstream) is
// bound, that the request is coming (engine.Preparer).
func (rq *request) prepare(b *binding, upstream string) error {
	b.job.Upstream = upstream
	p, ok := b.replica.Engine.(engine.Preparer)
	if !ok {
		return nil
	}
	if err := p.Prepare(rq.processCtx(b), &b.job); err != nil {
		if cause := context.Cause(rq.ctx); cause != nil {
			return cause
		}
		return &StageError{Stage: b.job.StageID, Name: b.stage.name, Replica: b.replica.ID, Err: err}
	}
	b.stageEvent("prepared")
	return nil
}

func (rq *request) bindError(id int, err error) error {
	name := rq.o.cfg.StageName(id)
	switch {
	case errors.Is(err, pool.ErrQueueFull):
		return &Error{Code: CodeOverloaded, Msg: fmt.Sprintf("stage %d (%s) is busy: its queue is full; retry later", id, name)}
	case errors.Is(err, pool.ErrNoReplica):
		return &Error{Code: CodeUnavailable, Msg: noReplicaMsg(id, name, err)}
	case errors.Is(err, pool.ErrClosed):
		return errShutdown
	}
	if cause := context.Cause(rq.ctx); cause != nil {
		return cause
	}
	return err
}

// noReplicaMsg is the message of stage id's pool.ErrNoReplica err, with
// the reason it carries (its endpoints' names resolve to no address).
func noReplicaMsg(id int, name string, err error) string {
	msg := fmt.Sprintf("stage %d (%s) has no healthy replica", id, name)
	if ne := (*pool.NoReplicaError)(nil); errors.As(err, &ne) {
		msg += ": " + ne.Why.Error()
	}
	return msg
}

// start runs one task per bound stage, joined by bounded channels; the
// last task to return ends the request. The entry stage reads input, or
// the prompt when input is nil.
func (rq *request) start(input engine.Source) {
	n := len(rq.bindings)
	in := input
	if in == nil {
		rq.prompt.Reset(engine.Chunk{Text: &engine.Text{Text: rq.bindings[0].job.Prompt.Text}})
		in = &rq.prompt
	}
	rq.pending.Store(int32(n))
	for i := range rq.bindings {
		b := &rq.bindings[i]
		id := b.job.StageID
		b.sink = stageSink{rq: rq, stage: id, final: id == rq.sel.Final, bind: b,
			audio: audioBudget{stage: id, name: b.stage.name, seconds: rq.o.cfg.Deploy.MaxAudioSeconds}}
		b.sink.selected, b.sink.kind, b.sink.plays = rq.selected(id), rq.o.route.Output(id), rq.playsAudio(id)
		if i < n-1 {
			b.sink.down = make(chan engine.Chunk, rq.o.cfg.Deploy.StreamBuffer)
			b.src.ch = b.sink.down
		}
		b.job.In, b.job.Out = in, &b.sink
		if b.mig != nil {
			b.mig.wrap(&b.job, &b.sink, b.stage.replay.Deterministic)
		}
		in = &b.src
	}
	for i := range rq.bindings {
		rq.o.workers.Go(task{rq: rq, stage: i})
	}
}

// selected reports whether the request selected stage id's output (for
// one modality or more: a stage's regions serve text as well).
func (rq *request) selected(id int) bool {
	for _, out := range rq.sel.Outputs {
		if out.Stage == id {
			return true
		}
	}
	return false
}

// runStage runs b's stage, then counts its task done. Not deferred: an
// engine that panics takes the process down with it, and must not first
// end its request as finished (in a worker, the parent would read a clean
// end of the call, its output cut short, before the worker died).
func (rq *request) runStage(b *binding) {
	rq.runEngine(b)
	rq.taskDone()
}

// runEngine runs b's stage on its replica and settles how it ended.
func (rq *request) runEngine(b *binding) {
	sink := &b.sink
	b.started = time.Now()
	b.stageEvent("started")
	err := rq.process(b)
	b.ended = time.Now()
	b.stage.duration.Observe(b.ended.Sub(b.started).Seconds())
	b.endStageSpan(err, err != nil && rq.ctx.Err() != nil)
	if sink.down != nil {
		close(sink.down)
	}
	if err != nil {
		if errors.Is(err, engine.ErrReplicaLost) {
			b.stage.sup.MarkLost(b.replica, err)
		}
		if rq.ctx.Err() == nil {
			rq.cancel(&StageError{Stage: b.job.StageID, Name: b.stage.name, Replica: b.replica.ID, Err: err})
		}
		return
	}
	// An engine may finish without reading all its input; drain it so the
	// producer is not left blocked on a full buffer (and a stage call's
	// caller sees its whole input read).
	for {
		if _, err := b.job.In.Recv(rq.ctx); err != nil {
			return
		}
	}
}

// taskDone ends the request when the last of its stage tasks returns.
func (rq *request) taskDone() {
	if rq.pending.Add(-1) == 0 {
		rq.finish()
	}
}

// finish ends the request: releases its bindings, frees its id and closes
// its stream. It runs once, after every stage task has returned.
func (rq *request) finish() {
	o := rq.o
	cause := context.Cause(rq.ctx)
	rq.cancel(context.Canceled)
	rq.stopOnClient()
	for i := range rq.bindings {
		b := &rq.bindings[i]
		b.stage.pool.Release(b.replica, b.holder)
	}
	rq.err = cause
	rq.endRequestSpan(cause)
	if cause == nil {
		o.metrics.ok.Inc()
	} else {
		o.metrics.requests.WithLabelValues(string(CodeOf(cause))).Inc()
	}
	if t := rq.abortedAt.Load(); t != 0 {
		o.metrics.abortDrain.Observe(time.Since(time.Unix(0, t)).Seconds())
	}
	o.release(rq)
	// done first: a reader that saw the stream end (out closed) finds the
	// request ended (Timings, Err).
	close(rq.done)
	close(rq.out)
}

// abort cancels the request with cause and marks it draining. Only the first
// cause counts.
func (rq *request) abort(cause error) {
	if rq.state.CompareAndSwap(int32(StateActive), int32(StateAborting)) {
		rq.abortedAt.Store(time.Now().UnixNano())
	}
	rq.cancel(cause)
}
