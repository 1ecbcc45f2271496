// Package remote is the engine of a stage whose replicas run elsewhere: each
// replica is one headless stage server (omnistage serve --stage N), reached
// over POST /v1/run.
//
// # One call per request
//
// Process reads the stage's whole input, sends it in one /v1/run call and
// sends the answer downstream. A remote stage therefore does not stream: its
// output leaves once the server has run the stage on all of its input.
//
// For stage 0 the call is the ordinary first call of a request: the prompt
// object, the sampling_params array and output_modalities. For a later
// stage the engine encodes its input as a regular payload, exactly as the
// upstream stage's server would have: this process's pipeline name and
// digest, From the stage's upstream on the route, To the stage, the
// request's prompt, and a sampling_params array with one entry per stage id
// in which only this stage's entry is set. Both forms name as
// output_modalities the output of the route's last stage, so the server
// runs the stage and, unless the stage ends the route, answers with a
// payload for the next stage whose data is exactly the stage's output: the
// engine decodes it and sends its chunks on. When the stage ends the route,
// the answer is finished and its output (a WAV file, word timestamps or
// text) becomes one chunk. Payloads are signed and checked with the codec
// the runtime passes, which must hold the stage servers' key.
//
// # Losing a replica
//
// Warm waits for the server's /ready, then the replica checks /health every
// health_interval. It is lost (Lost closes, for good) after health_failures
// failed checks in a row, or when a call gets no answer (refused or dropped
// connection): Process then returns an error wrapping engine.ErrReplicaLost.
// Answers with an error status do not lose the replica: a 4xx that blames
// the request's input becomes an *engine.InputError, anything else a plain
// error naming the server.
//
// # Options
//
// The runtime passes endpoint, pipeline and, when it has one, codec (see
// OptEndpoint, OptPipeline, OptCodec). A stage's deploy options may set
// payload_key_file, api_key_file, timeout, warm_timeout, health_interval and
// health_failures; keys the engine does not know are ignored, since for a
// stage with placement remote they are the stage engine's own options,
// which the stage server applies.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/runclient"
	"github.com/omnistage/omnistage/internal/wire"
)

// Name is the engine's name in configurations.
const Name = "remote"

// Register adds the remote engine to r.
func Register(r *engine.Registry) {
	r.Register(Name, engine.Driver{New: func(spec engine.Spec) (engine.Engine, error) { return New(spec) }})
}

// Engine is one replica: one stage server.
type Engine struct {
	spec   engine.Spec
	set    *settings
	plan   *plan // nil for a stage the route skips
	client *runclient.Client

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	watch  sync.Once
	wg     sync.WaitGroup

	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error // written before lost closes
}

var (
	_ engine.Engine  = (*Engine)(nil)
	_ engine.Watcher = (*Engine)(nil)
)

// plan is what every call of a stage on the route carries.
type plan struct {
	pipeline string
	digest   [32]byte
	numIDs   int
	upstream int      // the stage feeding this one; -1 for stage 0
	outputs  []string // output_modalities of every call
	finalID  int      // the stage those outputs end at
	ends     bool     // the stage ends the route: its answer is finished
	next     int      // the stage the answer's payload is for, when !final
	nextIn   engine.Kind
}

// New builds a replica from spec; see the package documentation for the
// options it reads.
func New(spec engine.Spec) (*Engine, error) {
	set, err := parseOptions(spec.Options)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	p, err := newPlan(set, spec)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	e := &Engine{spec: spec, set: set, plan: p, client: &runclient.Client{HTTP: runclient.NewHTTPClient(), APIKey: set.apiKey}, lost: make(chan struct{})}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

func newPlan(set *settings, spec engine.Spec) (*plan, error) {
	cfg := set.cfg
	route := cfg.Route
	if !route.OnRoute(spec.StageID) {
		return nil, nil // skipped: initialized and checked, never called
	}
	chain := route.Chain()
	_, last := cfg.StageSpec(chain[len(chain)-1], 0)
	p := &plan{pipeline: cfg.Pipeline.Name, digest: cfg.Digest(), numIDs: route.NumIDs(), upstream: -1, outputs: []string{string(last.Output)}}
	sel, err := route.Select(p.outputs)
	if err != nil {
		return nil, err
	}
	p.finalID = sel.Final
	for i, id := range sel.Stages {
		if id == spec.StageID && i > 0 {
			p.upstream = sel.Stages[i-1]
		}
	}
	if next, ok := sel.Next(spec.StageID); ok {
		_, ns := cfg.StageSpec(next, 0)
		p.next, p.nextIn = next, ns.Input
		return p, nil
	}
	p.ends = true
	switch spec.Output {
	case engine.KindAudio, engine.KindTimestamps, engine.KindText:
	default:
		return nil, fmt.Errorf("stage %d (%s) ends the route and outputs %s, but /v1/run returns only audio, timestamps and text as a final output", spec.StageID, spec.Name, spec.Output)
	}
	return p, nil
}

// Endpoint returns the stage server's base URL.
func (e *Engine) Endpoint() string { return e.set.endpoint }

// Warm waits until the stage server's /ready answers 200, for at most the
// warm_timeout option, then starts the replica's health checks.
func (e *Engine) Warm(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, e.set.warmTimeout)
	defer cancel()
	pause := 20 * time.Millisecond
	for {
		err := e.client.Probe(ctx, e.set.endpoint, "/ready")
		if err == nil {
			break
		}
		var he *runclient.HTTPError
		if errors.As(err, &he) && !he.Temporary() {
			return fmt.Errorf("remote: %s/ready: %w (is it an omnistage stage server?)", e.set.endpoint, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if parent.Err() != nil {
				return fmt.Errorf("remote: %s not ready: %w", e.set.endpoint, parent.Err())
			}
			return fmt.Errorf("remote: %s not ready after %s: %w", e.set.endpoint, e.set.warmTimeout, err)
		}
		pause = min(2*pause, time.Second)
	}
	e.watch.Do(func() {
		e.wg.Add(1)
		go e.healthLoop()
	})
	return nil
}

// minProbeTimeout is the least time a health check waits for its answer,
// however short the interval.
const minProbeTimeout = time.Second

// healthLoop checks /health until Close, and loses the replica after too
// many failures in a row.
func (e *Engine) healthLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.set.healthInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.lost:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(e.ctx, max(e.set.healthInterval, minProbeTimeout))
		err := e.client.Probe(ctx, e.set.endpoint, "/health")
		cancel()
		if e.ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		if failures++; failures >= e.set.healthFailures {
			e.markLost(fmt.Errorf("%d health checks of %s failed in a row, the last: %w", failures, e.set.endpoint, err))
			return
		}
	}
}

func (e *Engine) markLost(cause error) {
	e.lostOnce.Do(func() {
		e.lostErr = cause
		close(e.lost)
	})
}

// Lost implements engine.Watcher.
func (e *Engine) Lost() <-chan struct{} { return e.lost }

// Close stops the health checks and closes the replica's idle
// connections. The runtime calls it after the last Process has returned.
func (e *Engine) Close() error {
	e.cancel()
	e.wg.Wait()
	e.client.HTTP.CloseIdleConnections()
	return nil
}

// Process implements engine.Engine.
func (e *Engine) Process(ctx context.Context, job *engine.Job) error {
	select {
	case <-e.lost:
		return fmt.Errorf("remote %s: %w: %w", e.set.endpoint, engine.ErrReplicaLost, e.lostErr)
	default:
	}
	if e.plan == nil {
		return fmt.Errorf("remote: stage %d is not on the route", e.spec.StageID)
	}
	in, err := engine.RecvAll(ctx, job.In)
	if err != nil {
		return err
	}
	req, err := e.request(job, in)
	if err != nil {
		return err
	}
	callCtx := ctx
	if e.set.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, e.set.timeout)
		defer cancel()
	}
	resp, err := e.client.Run(callCtx, e.set.endpoint, req)
	if err != nil {
		return e.callError(ctx, err)
	}
	out, err := e.output(resp)
	if err != nil {
		return fmt.Errorf("remote %s: %w", e.set.endpoint, err)
	}
	for _, c := range out {
		if err := job.Out.Send(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// request builds the /v1/run call that runs the stage on in.
func (e *Engine) request(job *engine.Job, in []engine.Chunk) (*wire.RunRequest, error) {
	p := e.plan
	stage := e.spec.StageID
	if stage == 0 {
		var text strings.Builder
		for _, c := range in {
			if c.Text == nil {
				return nil, fmt.Errorf("remote: stage 0 takes text, got a %s chunk", c.Kind())
			}
			text.WriteString(c.Text.Text)
		}
		input, err := json.Marshal(wire.Prompt{Text: text.String()})
		if err != nil {
			return nil, fmt.Errorf("remote: %w", err)
		}
		req := &wire.RunRequest{StageID: &stage, StageInput: input, RequestID: job.RequestID, OutputModalities: p.outputs}
		if job.Params != nil {
			req.SamplingParams = e.params(job.Params)
		}
		return req, nil
	}
	id := job.RequestID
	if id == "" {
		id = fmt.Sprintf("remote-%d", time.Now().UnixNano())
	}
	s, err := e.set.codec.Encode(&payload.Envelope{
		Pipeline: p.pipeline, Digest: p.digest, TransferID: id, RequestID: id,
		From: p.upstream, To: stage, Final: p.finalID, Outputs: p.outputs,
		Params: e.params(job.Params), Prompt: job.Prompt, Data: in,
	})
	if err != nil {
		var pe *payload.Error
		if errors.As(err, &pe) {
			return nil, &engine.InputError{Reason: pe.Message}
		}
		return nil, fmt.Errorf("remote: %w", err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	return &wire.RunRequest{StageID: &stage, StageInput: raw}, nil
}

// params returns a sampling_params array with one entry per stage id, this
// stage's set to mine.
func (e *Engine) params(mine json.RawMessage) []json.RawMessage {
	ps := make([]json.RawMessage, e.plan.numIDs)
	ps[e.spec.StageID] = mine
	return ps
}

// callError turns a failed call into the engine's error.
func (e *Engine) callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var (
		te *runclient.TransportError
		he *runclient.HTTPError
	)
	switch {
	case errors.As(err, &te):
		e.markLost(err)
		return fmt.Errorf("remote %s: %w: %w", e.set.endpoint, engine.ErrReplicaLost, err)
	case errors.Is(err, context.DeadlineExceeded):
		// Not the request's deadline (ctx is alive): the timeout option's.
		return fmt.Errorf("remote %s: no answer within %s", e.set.endpoint, e.set.timeout)
	case errors.As(err, &he) && he.Status == 400 && he.Code == "bad_request":
		// The server's engine refused the request's own input or params.
		return &engine.InputError{Reason: he.Message}
	}
	return fmt.Errorf("remote %s: %w", e.set.endpoint, err)
}

// output turns an answer into the stage's output chunks.
func (e *Engine) output(resp *wire.RunResponse) ([]engine.Chunk, error) {
	p := e.plan
	stage := e.spec.StageID
	if !resp.Finished {
		if p.ends {
			return nil, fmt.Errorf("stage %d ends the route, but the answer goes on to stage %d: does the server run the same pipeline?", stage, resp.StageID)
		}
		if resp.StageID != p.next {
			return nil, fmt.Errorf("the answer goes on to stage %d, but stage %d's successor is stage %d: does the server run the same pipeline?", resp.StageID, stage, p.next)
		}
		env, err := e.set.codec.Decode(resp.StageInput, payload.Expect{
			Pipeline: p.pipeline, Digest: p.digest, Stage: p.next, NumStages: p.numIDs, Input: p.nextIn,
		})
		if err != nil {
			return nil, fmt.Errorf("answer's stage_input: %w", err)
		}
		if env.From != stage {
			return nil, fmt.Errorf("answer's payload holds the output of stage %d, not of stage %d", env.From, stage)
		}
		return env.Data, nil
	}
	if !p.ends {
		return nil, fmt.Errorf("the answer is finished at stage %d, but stage %d feeds stage %d: does the server run the same pipeline?", resp.StageID, stage, p.next)
	}
	o := resp.Output
	switch e.spec.Output {
	case engine.KindAudio:
		if o.Audio == nil || len(o.Audio.Data) == 0 {
			return nil, nil
		}
		a, err := audio.ReadWAV(bytes.NewReader(o.Audio.Data))
		if err != nil {
			return nil, fmt.Errorf("answer's audio: %w", err)
		}
		return []engine.Chunk{{Audio: a}}, nil
	case engine.KindTimestamps:
		if o.Timestamps == nil {
			return nil, nil
		}
		return []engine.Chunk{{Words: &engine.Words{Words: o.Timestamps}}}, nil
	case engine.KindText:
		if o.Text == "" {
			return nil, nil
		}
		return []engine.Chunk{{Text: &engine.Text{Text: o.Text}}}, nil
	}
	return nil, fmt.Errorf("stage %d's %s output cannot come back in a finished answer", stage, e.spec.Output)
}
