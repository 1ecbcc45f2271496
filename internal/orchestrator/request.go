package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/stage"
)

// Request is what a caller submits.
type Request struct {
	// ID is the caller's request id; empty means generate one.
	ID string
	// Prompt is the input the route's entry stage takes.
	Prompt engine.Prompt
	// Modalities selects the outputs; empty means the route tail's type.
	Modalities []string
	// Params holds per-stage sampling params indexed by stage id (the
	// aligner's at the pipeline's stage count); nil entries mean defaults.
	Params []json.RawMessage
	// Only, when set, makes the request a hop: it runs just one stage of
	// the route on the given input instead of the route prefix, and returns
	// that stage's output as the final output (one stateless /v1/run
	// call). Modalities are ignored. A hop does not claim its ID (see the
	// package documentation).
	Only *StageCall
}

// StageCall is one stage run alone on an input handed over by its
// upstream.
type StageCall struct {
	Stage int
	// Input yields the stage's input as the caller receives it. Its Recv
	// must return promptly once its ctx is cancelled. The stage may stop
	// reading it before its end (when it fails or the request is aborted):
	// what is left is the caller's to discard.
	Input engine.Source
}

// OutputChunk is one chunk of a selected output, as Stream.Recv returns it.
type OutputChunk struct {
	Stage int
	Kind  engine.Kind
	Chunk engine.Chunk
	// Final is true for the final stage's output, false for the
	// intermediate outputs the request also selected.
	Final bool
}

// State is where an admitted request is in its life.
type State int32

// The states of an admitted request.
const (
	StateActive      State = iota // running
	StateAborting                 // aborted, its stages draining
	StateAbortFailed              // the abort outlasted its timeout; the id stays held until the drain ends
)

func (s State) String() string {
	switch s {
	case StateActive:
		return "active"
	case StateAborting:
		return "aborting"
	case StateAbortFailed:
		return "abort_failed"
	}
	return "unknown"
}

// MaxIDLen bounds caller-supplied request ids.
const MaxIDLen = 128

// binding is one stage of a request: the replica it is bound to, its job,
// and the ends of its streams (kept here so that a request allocates them
// at once).
type binding struct {
	stage   *stageRun
	replica *stage.Replica
	job     engine.Job
	sink    stageSink
	src     chanSource // the next stage's input, when there is one

	// The stage's timeline (Stream.Timings): bound when bind got its
	// replica, started and ended around Process (written by its task), first
	// when it sent its first chunk (unix nanos, by whatever goroutine sent).
	bound, started, ended time.Time
	first                 atomic.Int64

	span trace.Span // the stage's span; nil when tracing is off
}

// request is one admitted request. Its fields are set before its tasks start
// and read-only afterwards, except where noted.
type request struct {
	o      *Orchestrator
	id     string
	sel    *pipeline.Selection
	ctx    context.Context
	cancel context.CancelCauseFunc

	hop          bool
	bindings     []binding
	out          chan OutputChunk
	pending      atomic.Int32 // stage tasks not yet returned
	state        atomic.Int32
	stopOnClient func() bool

	prompt    engine.SliceSource // the entry stage's input, unless the request is a hop
	stream    Stream             // what Submit returns
	submitted time.Time

	// When tracing: the ctx holding the span the stage spans are children
	// of, and the request's own span (nil for a hop).
	traceCtx context.Context
	span     trace.Span

	abortedAt atomic.Int64  // unix nanos of the first abort, for the drain-time metric
	done      chan struct{} // closed when the request has fully ended
	err       error         // the outcome; written before done closes
}

// ReplicaLost implements stage.Holder: a bound replica is gone, so the
// request fails with an error naming it.
func (rq *request) ReplicaLost(r *stage.Replica, cause error) {
	rq.cancel(&ReplicaLostError{Stage: r.Stage, Name: rq.o.cfg.StageName(r.Stage), Replica: r.ID, Err: cause})
}

// Submit admits a request and starts it. It returns once the request is
// bound to a replica of every stage it needs (waiting in a stage's queue if
// all its replicas are busy) and its stages are running. Cancelling ctx at
// any time aborts the request. The caller reads the Stream to its end, or
// calls Stream.Close.
func (o *Orchestrator) Submit(ctx context.Context, req Request) (*Stream, error) {
	if !o.ready.Load() {
		return nil, newError(CodeUnavailable, "pipeline %s is not ready", o.cfg.Pipeline.Name)
	}
	var sel *pipeline.Selection
	var err error
	if req.Only != nil {
		sel, err = o.route.Only(req.Only.Stage)
	} else {
		sel, err = o.route.Select(req.Modalities)
	}
	if err != nil {
		return nil, err
	}
	if err := o.CheckParams(sel, req.Params); err != nil {
		return nil, err
	}
	for _, id := range sel.Stages {
		if o.stages[id] == nil {
			return nil, newError(CodeUnavailable, "stage %d (%s) is not served here", id, o.cfg.StageName(id))
		}
	}
	id := req.ID
	if id == "" {
		id = o.newID()
	} else if err := checkID(id); err != nil {
		return nil, err
	}

	rq := &request{o: o, id: id, sel: sel, hop: req.Only != nil, out: make(chan OutputChunk, o.cfg.Deploy.StreamBuffer), done: make(chan struct{}), submitted: time.Now()}
	rq.ctx, rq.cancel = context.WithCancelCause(context.Background())
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

	if err := rq.bind(req); err != nil {
		rq.cancel(err)
		rq.finish()
		return nil, rq.err
	}
	rq.start(req.Only)
	rq.stream.rq = rq
	return &rq.stream, nil
}

// noClient is stopOnClient for a ctx that is never cancelled.
func noClient() bool { return false }

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
	if id >= len(o.stages) || o.stages[id] == nil || o.stages[id].checker == nil {
		return nil
	}
	if err := o.stages[id].checker.CheckParams(params); err != nil {
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

func checkID(id string) error {
	if len(id) > MaxIDLen {
		return newError(CodeBadRequest, "request id is %d bytes long; the limit is %d", len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return newError(CodeBadRequest, "request id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return newError(CodeBadRequest, "request id %q may hold only printable characters without spaces", id)
		}
	}
	return nil
}

// idPrefix starts the ids this process generates: random, so that ids of
// two servers (or two runs of one) do not collide in a shared log.
var idPrefix = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req-" + hex.EncodeToString(b[:]) + "-"
}()

func (o *Orchestrator) newID() string {
	return idPrefix + strconv.FormatUint(o.nextID.Add(1), 10)
}

// admit registers rq under its id and counts it against the in-flight
// limit. An ordinary request claims its id; a hop does not.
func (o *Orchestrator) admit(rq *request) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.closing:
		return errShutdown
	default:
	}
	h := o.active[rq.id]
	if h != nil && h.req != nil && !rq.hop {
		o.metrics.requests.WithLabelValues(string(CodeConflict)).Inc()
		return newError(CodeConflict, "request id %q is still in use (%s); reuse it once that request has ended", rq.id, State(h.req.state.Load()))
	}
	if o.inflight >= o.cfg.Deploy.MaxInflight {
		o.metrics.requests.WithLabelValues(string(CodeOverloaded)).Inc()
		return newError(CodeOverloaded, "server busy: %d requests in flight, the limit is %d; retry later", o.inflight, o.cfg.Deploy.MaxInflight)
	}
	if h == nil {
		h = &holders{}
		o.active[rq.id] = h
	}
	if rq.hop {
		if h.hops == nil {
			h.hops = map[*request]struct{}{}
		}
		h.hops[rq] = struct{}{}
	} else {
		h.req = rq
	}
	o.inflight++
	o.metrics.inflight.Set(float64(o.inflight))
	if o.inflight == 1 && o.opts.Idle != nil {
		o.opts.Idle.Busy()
	}
	return nil
}

// release removes rq from the active requests; it reports whether no
// request is left in flight.
func (o *Orchestrator) release(rq *request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.active[rq.id]; h != nil {
		if rq.hop {
			delete(h.hops, rq)
		} else if h.req == rq {
			h.req = nil
		}
		if h.req == nil && len(h.hops) == 0 {
			delete(o.active, rq.id)
		}
	}
	o.inflight--
	o.metrics.inflight.Set(float64(o.inflight))
	if o.inflight == 0 && o.opts.Idle != nil {
		o.opts.Idle.Idle()
	}
	if o.inflight == 0 && o.idle != nil {
		close(o.idle)
		o.idle = nil
	}
}

// appendTo appends the requests of h to rs.
func (h *holders) appendTo(rs []*request) []*request {
	if h.req != nil {
		rs = append(rs, h.req)
	}
	for rq := range h.hops {
		rs = append(rs, rq)
	}
	return rs
}

// bind binds rq to a replica of every stage on its route prefix, in route
// order, preparing each receiver after its producer is bound.
func (rq *request) bind(req Request) error {
	o := rq.o
	rq.bindings = make([]binding, 0, len(rq.sel.Stages))
	for i, id := range rq.sel.Stages {
		st := o.stages[id]
		span := rq.startStageSpan(id, st.name)
		var asked time.Time // for the span's queue wait
		if span != nil {
			asked = time.Now()
		}
		r, err := st.pool.Acquire(rq.ctx, rq)
		if err != nil {
			err = rq.bindError(id, err)
			failSpan(span, err)
			return err
		}
		rq.bindings = append(rq.bindings, binding{stage: st, replica: r, bound: time.Now(), span: span, job: engine.Job{
			RequestID: rq.id, StageID: id, Params: paramAt(req.Params, id), Prompt: req.Prompt,
		}})
		bb := &rq.bindings[i]
		bb.boundEvent(asked)
		if i > 0 {
			bb.job.Upstream = rq.bindings[i-1].replica.ID
			if p, ok := r.Engine.(engine.Preparer); ok {
				if err := p.Prepare(rq.processCtx(bb), &bb.job); err != nil {
					if cause := context.Cause(rq.ctx); cause != nil {
						return cause
					}
					return &StageError{Stage: id, Name: st.name, Replica: r.ID, Err: err}
				}
				bb.stageEvent("prepared")
			}
		}
		if cause := context.Cause(rq.ctx); cause != nil {
			return cause
		}
	}
	return nil
}

func (rq *request) bindError(id int, err error) error {
	name := rq.o.cfg.StageName(id)
	switch {
	case errors.Is(err, stage.ErrQueueFull):
		return &Error{Code: CodeOverloaded, Msg: fmt.Sprintf("stage %d (%s) is busy: its queue is full; retry later", id, name)}
	case errors.Is(err, stage.ErrNoReplica):
		return &Error{Code: CodeUnavailable, Msg: noReplicaMsg(id, name, err)}
	case errors.Is(err, stage.ErrClosed):
		return errShutdown
	}
	if cause := context.Cause(rq.ctx); cause != nil {
		return cause
	}
	return err
}

// noReplicaMsg is the message of stage id's stage.ErrNoReplica err, with
// the reason it carries (its endpoints' names resolve to no address).
func noReplicaMsg(id int, name string, err error) string {
	msg := fmt.Sprintf("stage %d (%s) has no healthy replica", id, name)
	if why, ok := strings.CutPrefix(fmt.Sprint(err), stage.ErrNoReplica.Error()+": "); ok {
		msg += ": " + why
	}
	return msg
}

// start runs one task per bound stage, joined by bounded channels; the
// last task to return ends the request.
func (rq *request) start(only *StageCall) {
	n := len(rq.bindings)
	var in engine.Source
	if only != nil {
		in = only.Input
	} else {
		rq.prompt.Reset(engine.Chunk{Text: &engine.Text{Text: rq.bindings[0].job.Prompt.Text}})
		in = &rq.prompt
	}
	rq.pending.Store(int32(n))
	for i := range rq.bindings {
		b := &rq.bindings[i]
		b.sink = stageSink{rq: rq, stage: b.job.StageID, final: b.job.StageID == rq.sel.Final, bind: b}
		b.sink.selected, b.sink.kind = rq.selected(b.job.StageID)
		if i < n-1 {
			b.sink.down = make(chan engine.Chunk, rq.o.cfg.Deploy.StreamBuffer)
			b.src.ch = b.sink.down
		}
		b.job.In, b.job.Out = in, &b.sink
		in = &b.src
	}
	for i := range rq.bindings {
		rq.o.workers.Go(task{rq: rq, stage: i})
	}
}

func (rq *request) selected(id int) (bool, engine.Kind) {
	for _, out := range rq.sel.Outputs {
		if out.Stage == id {
			return true, out.Kind
		}
	}
	return false, ""
}

func (rq *request) runStage(b *binding) {
	defer rq.taskDone()
	sink := &b.sink
	b.started = time.Now()
	b.stageEvent("started")
	err := b.replica.Engine.Process(rq.processCtx(b), &b.job)
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
	// producer is not left blocked on a full buffer (and a hop's caller
	// sees its whole input read).
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
		b.stage.pool.Release(b.replica, rq)
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
	close(rq.out)
	close(rq.done)
}

// abort cancels the request with cause and marks it draining. Only the first
// cause counts.
func (rq *request) abort(cause error) {
	if rq.state.CompareAndSwap(int32(StateActive), int32(StateAborting)) {
		rq.abortedAt.Store(time.Now().UnixNano())
	}
	rq.cancel(cause)
}

// Abort aborts the request with the given id, and every hop of that id, and
// waits for their stages to drain. A second Abort of the same request
// joins the first. If a drain outlasts the deployment's abort timeout, the
// request is left in the abort_failed state, holding its id until the
// drain ends, and Abort returns an error with code abort_failed.
func (o *Orchestrator) Abort(ctx context.Context, id string) error {
	o.mu.Lock()
	var reqs []*request
	if h := o.active[id]; h != nil {
		reqs = h.appendTo(nil)
	}
	o.mu.Unlock()
	if len(reqs) == 0 {
		return newError(CodeNotFound, "no active request with id %q", id)
	}
	for _, rq := range reqs {
		rq.abort(errAborted)
	}
	timer := time.NewTimer(o.cfg.Deploy.AbortTimeout)
	defer timer.Stop()
	for _, rq := range reqs {
		select {
		case <-rq.done:
		case <-timer.C:
			for _, rq := range reqs {
				select {
				case <-rq.done:
				default:
					rq.state.Store(int32(StateAbortFailed))
				}
			}
			o.metrics.aborts.WithLabelValues(string(CodeAbortFailed)).Inc()
			o.log.WarnContext(reqs[0].logCtx(), "abort did not drain in time", "request_id", id, "timeout", o.cfg.Deploy.AbortTimeout)
			return newError(CodeAbortFailed, "request %q did not drain within %s; its id stays in use until it does", id, o.cfg.Deploy.AbortTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.metrics.aborts.WithLabelValues("drained").Inc()
	return nil
}

// Lookup returns the state of the active or draining request with the
// given id, or of its hops (the least advanced one's: active before
// aborting before abort_failed).
func (o *Orchestrator) Lookup(id string) (State, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.active[id]
	if !ok {
		return 0, false
	}
	if h.req != nil {
		return State(h.req.state.Load()), true
	}
	state := StateAbortFailed
	for rq := range h.hops {
		state = min(state, State(rq.state.Load()))
	}
	return state, true
}

// chanSource is a stage's input: its producer's bounded channel.
type chanSource struct {
	ch chan engine.Chunk
}

// Recv implements engine.Source.
func (s *chanSource) Recv(ctx context.Context) (engine.Chunk, error) {
	// A chunk that is already there is taken without a select on ctx;
	// like the select, this may hand over a chunk after ctx ended.
	select {
	case c, ok := <-s.ch:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	default:
	}
	select {
	case c, ok := <-s.ch:
		if !ok {
			return engine.Chunk{}, io.EOF
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// stageSink is a stage's output: the next stage's bounded channel and, when
// the request selected this stage's output, the request's output stream.
type stageSink struct {
	rq       *request
	stage    int
	kind     engine.Kind
	down     chan engine.Chunk
	selected bool
	final    bool
	bind     *binding // its first output time and span
	// audioSamples counts the audio sent; Sends of one sink do not overlap.
	audioSamples int64
}

// Send implements engine.Sink.
func (s *stageSink) Send(ctx context.Context, c engine.Chunk) error {
	if err := ctx.Err(); err != nil {
		s.rq.o.metrics.lateDropped.Inc()
		return err
	}
	if b := s.bind; b.first.Load() == 0 && b.first.CompareAndSwap(0, time.Now().UnixNano()) {
		b.stageEvent("first_output")
	}
	if a := c.Audio; a != nil && a.SampleRate > 0 {
		// Bounded cost: a request may not make more audio than the limit,
		// however short its text ("99999 " spoken out loud for an hour).
		s.audioSamples += int64(len(a.Samples))
		if limit := int64(s.rq.o.cfg.Deploy.MaxAudioSeconds); s.audioSamples > limit*int64(a.SampleRate) {
			err := newError(CodeBadRequest, "stage %d's audio passed the limit of %d s for one request (deploy.max_audio_seconds): send less text per request", s.stage, limit)
			s.rq.cancel(err)
			return err
		}
	}
	if s.down != nil {
		select {
		case s.down <- c:
		default:
			select {
			case s.down <- c:
			case <-ctx.Done():
				s.rq.o.metrics.lateDropped.Inc()
				return ctx.Err()
			}
		}
	}
	if s.selected {
		out := OutputChunk{Stage: s.stage, Kind: s.kind, Chunk: c, Final: s.final}
		select {
		case s.rq.out <- out:
		default:
			select {
			case s.rq.out <- out:
			case <-ctx.Done():
				s.rq.o.metrics.lateDropped.Inc()
				return ctx.Err()
			}
		}
	}
	return nil
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
// and returned.
type StageTiming struct {
	Stage         int     `json:"stage"`
	Name          string  `json:"name"`
	Replica       string  `json:"replica"`
	BoundMs       float64 `json:"bound_ms"`
	StartMs       float64 `json:"start_ms"`
	FirstOutputMs float64 `json:"first_output_ms"`
	EndMs         float64 `json:"end_ms"`
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
			first = ms(time.Unix(0, n))
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

// Result is one selected output, complete.
type Result struct {
	Stage  int
	Kind   engine.Kind
	Final  bool
	Chunks []engine.Chunk
}

// Collect reads the stream to its end and returns every selected output,
// in route order, with its chunks in the order they were produced.
func (s *Stream) Collect(ctx context.Context) ([]Result, error) {
	outs := make([]Result, len(s.rq.sel.Outputs))
	for i, o := range s.rq.sel.Outputs {
		outs[i] = Result{Stage: o.Stage, Kind: o.Kind, Final: o.Stage == s.rq.sel.Final}
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
				break
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
