// Package orchestrator runs requests along a pipeline's route over the stage
// pools: admission, binding, streaming between stages, output selection,
// completion, abort and id reuse.
//
// # Life of a request
//
// Submit validates the request (outputs, params, id), admits it against the
// global in-flight limit, then binds it to one replica per stage of its
// route prefix, in route order: on each edge the producer is bound before the
// receiver is prepared for it. It then starts one task per stage, joined by
// bounded channels, and returns a Stream. The request ends when every stage
// task has returned; only then are its bindings released, its id freed and
// its Stream closed. An abort cancels the request's context, which stops
// every stage; Abort waits for that drain.
//
// # Stage calls
//
// SubmitStage runs one stage of the route alone, on an input streamed in
// by the caller (one POST /v1/run). A stage call's ID names the request it
// belongs to, but does not claim it: calls with the same ID may run at once
// (a coordinator that retries a call while the first attempt still runs
// gets two answers, never a 409), beside a request of that ID. Abort and
// Lookup of an ID reach the request and every stage call of that ID.
//
// # Placements and lost replicas
//
// A stage's replicas run in this process (placement inproc, through the
// engine registry) or elsewhere, built by the Options' Placements:
// worker processes (placement process) or stage servers (placement
// remote). A pool.Supervisor per stage builds and warms its replicas and
// restarts lost ones (see package pool). A replica is lost when its
// engine's Watcher channel closes (a worker process exited, a remote
// server stopped answering) or a Process call returns an error wrapping
// engine.ErrReplicaLost. A request bound to it goes on on another healthy
// replica of the stage when the stage allows it (its engine can replay a
// job from the start of a unit of work, engine.Replay, and its deploy
// entry does not say migrate: false; see migrate.go), at most
// max_migrations times; otherwise, or when no other replica is up, it
// fails with a *ReplicaLostError. New requests go to the stage's other
// healthy replicas; when none is left, the requests waiting in the
// stage's queue fail at once and new ones are refused as unavailable until
// a replica is back.
//
// # Stop order
//
// Shutdown refuses new requests and stops the supervisors' restart waits,
// waits for in-flight requests (aborting those still running when its
// context ends), then closes every supervisor: its watchers and restart
// loops end (an attempt already building an engine finishes first) and its
// pool's engines are closed, the lost ones not closed yet included.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/turns"
)

// Options configure an Orchestrator.
type Options struct {
	// Registry maps engine names to drivers: the engines of the stages
	// placed in this process, and of those in worker processes (which
	// are checked here before any process starts). Every engine a
	// configuration names must be registered (pipeline.EngineRemote
	// aside).
	Registry *engine.Registry
	// Registerer receives the orchestrator's metrics; nil for none.
	Registerer prometheus.Registerer
	// Logger gets lifecycle and per-request lines; nil discards them.
	Logger *slog.Logger
	// Placements build the replicas of the stages that run outside this
	// process, by placement (pipeline.PlacementProcess and
	// PlacementRemote); a configuration that names a placement missing
	// here is refused.
	Placements map[pipeline.Placement]Placement
	// Stages, when not nil, limits the stages built and served to these ids
	// (a headless stage server builds only its own). Requests that need
	// another stage are refused as unavailable.
	Stages []int
	// RestartBackoff and RestartBackoffMax are the lost replicas' restart
	// backoff (pool.Config): zero means the defaults, and a
	// negative RestartBackoff disables restarts.
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	// TracerProvider, when not nil, traces every request (see tracing.go);
	// nil traces nothing, at no cost.
	TracerProvider trace.TracerProvider
	// Idle, when not nil, hears when the orchestrator becomes busy and
	// idle (package memtrim trims memory when it has gone quiet).
	Idle IdleObserver
	// Requests, when not nil, is the registry of request ids this
	// orchestrator shares with the other pipelines of its server; nil
	// means one of its own.
	Requests *Requests
	// Turns, when not nil, shares the CPU among the requests (of every
	// pipeline it is given to) by playback deadline: engines take turns
	// for their units of work (engine.Turn). Nil: every unit runs at once.
	Turns *turns.Scheduler
}

// IdleObserver hears when requests start and stop being in flight (stage
// calls included). Busy is called when a request is admitted while none is in
// flight, Idle when the last one in flight ends; the calls alternate,
// Busy first, and are made under the orchestrator's lock, so they must
// not block.
type IdleObserver interface {
	Busy()
	Idle()
}

// Orchestrator runs one pipeline.
type Orchestrator struct {
	cfg   *pipeline.Config
	route *pipeline.Route
	opts  Options
	log   *slog.Logger
	// tracer makes the requests' spans; nil when tracing is off.
	tracer trace.Tracer

	stages  []*stageRun // by stage id, the aligner included; nil for a stage not served here
	built   []*stageRun // the non-nil stages, in id order
	metrics *metrics
	workers workers // runs the stage tasks

	ready   atomic.Bool
	closing chan struct{} // closed when Shutdown starts
	closed  chan struct{} // closed when Shutdown has finished

	reqs     *Requests             // the ids in flight, maybe shared with other orchestrators
	mu       sync.Mutex            // guards what follows (see admission.go)
	live     map[*request]struct{} // the requests in flight here
	inflight int
	idle     chan struct{} // closed and replaced when inflight drops to zero; nil when none waits
}

// New builds every stage's replicas (skipped stages included) without
// starting them. Call Start before submitting requests.
func New(cfg *pipeline.Config, opts Options) (*Orchestrator, error) {
	if cfg.Route == nil {
		return nil, errors.New("orchestrator: config has no resolved route")
	}
	if opts.Registry == nil {
		return nil, errors.New("orchestrator: no engine registry")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.CheckEngines(opts.Registry); err != nil {
		return nil, err
	}
	o := &Orchestrator{
		cfg: cfg, route: cfg.Route, opts: opts, log: opts.Logger, tracer: newTracer(opts.TracerProvider),
		closing: make(chan struct{}),
		closed:  make(chan struct{}),
		reqs:    opts.Requests,
		live:    map[*request]struct{}{},
	}
	if o.reqs == nil {
		o.reqs = NewRequests()
	}
	o.stages = make([]*stageRun, cfg.Route.NumIDs())
	for _, id := range opts.Stages {
		if id < 0 || id >= len(o.stages) {
			return nil, fmt.Errorf("orchestrator: no stage %d to serve (stage ids are 0..%d)", id, len(o.stages)-1)
		}
	}
	m := newMetrics()
	closeBuilt := func() {
		for _, st := range o.built {
			_ = st.sup.Close()
		}
	}
	for id := range cfg.Route.NumIDs() {
		if opts.Stages != nil && !slices.Contains(opts.Stages, id) {
			continue
		}
		st, err := o.buildStage(id, m)
		if err != nil {
			closeBuilt()
			return nil, err
		}
		o.stages[id] = st
		o.built = append(o.built, st)
	}
	if err := m.register(opts.Registerer, o.built); err != nil {
		closeBuilt()
		return nil, fmt.Errorf("orchestrator: metrics: %w", err)
	}
	o.metrics = m
	return o, nil
}

// Start warms every replica of every stage, skipped stages included, and
// starts watching replicas that can be lost. The orchestrator is ready when
// Start returns nil.
func (o *Orchestrator) Start(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, st := range o.built {
		g.Go(func() error { return st.sup.Warm(gctx) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	for _, st := range o.built {
		st.settleReplay()
	}
	o.ready.Store(true)
	o.log.Info("pipeline ready", "route", o.route.String(), "skipped", o.route.Skipped())
	return nil
}

// Ready reports whether every replica has warmed up and the orchestrator
// takes requests (NotReady says why not).
func (o *Orchestrator) Ready() bool { return o.NotReady() == nil }

// NotReady returns why the orchestrator does not take requests, or nil when
// it does: its replicas are still warming up, or a stage has no replica at
// all (a remote stage whose endpoint names resolve to no address).
func (o *Orchestrator) NotReady() error {
	if !o.ready.Load() {
		return fmt.Errorf("pipeline %s is not ready: its replicas are warming up", o.cfg.Pipeline.Name)
	}
	for _, st := range o.built {
		if err := st.pool.Empty(); err != nil {
			return fmt.Errorf("pipeline %s is not ready: %s", o.cfg.Pipeline.Name, noReplicaMsg(st.id, st.name, err))
		}
	}
	return nil
}

// Voices returns the voices of the route's first stage (the talker) that
// it can speak with the kind it outputs: those a replica of it in this
// process names (engine.Voicer), or else those its engine's driver
// describes; nil when its engine is not registered here or describes none.
func (o *Orchestrator) Voices() []engine.Voice {
	first := o.route.Chain()[0]
	name, spec := o.cfg.StageSpec(first, 0)
	var all []engine.Voice
	if st := o.stages[first]; st != nil && st.inproc {
		if r := st.pool.AnyHealthy(); r != nil {
			if v, ok := r.Engine.(engine.Voicer); ok {
				all = v.Voices()
			}
		}
	}
	if all == nil {
		all = o.driverVoices(name)
	}
	var voices []engine.Voice
	for _, v := range all {
		if v.Output == "" || v.Output == spec.Output {
			voices = append(voices, v)
		}
	}
	return voices
}

// driverVoices returns the voices engine name's driver describes.
func (o *Orchestrator) driverVoices(name string) []engine.Voice {
	if o.opts.Registry == nil {
		return nil
	}
	d, ok := o.opts.Registry.Lookup(name)
	if !ok {
		return nil
	}
	return d.Voices
}

// Config returns the pipeline configuration being served.
func (o *Orchestrator) Config() *pipeline.Config { return o.cfg }

// Shutdown stops admission, waits for in-flight requests to end (aborting
// those still running when ctx ends), then closes every engine. A second
// call waits for the first to finish and returns nil.
func (o *Orchestrator) Shutdown(ctx context.Context) error {
	o.mu.Lock()
	select {
	case <-o.closing:
		o.mu.Unlock()
		select {
		case <-o.closed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	default:
	}
	defer close(o.closed)
	o.ready.Store(false)
	close(o.closing)
	o.mu.Unlock()
	for _, st := range o.built {
		st.sup.Stop()
	}

	var drainErr error
	if err := o.waitIdle(ctx); err != nil {
		for _, rq := range o.inFlight() {
			rq.cancel(errShutdown)
		}
		// The stages now see a cancelled context; give them the abort
		// timeout to return.
		wctx, cancel := context.WithTimeout(context.Background(), o.cfg.Deploy.AbortTimeout)
		drainErr = o.waitIdle(wctx)
		cancel()
		if drainErr != nil {
			drainErr = fmt.Errorf("orchestrator: requests still running after shutdown: %w", drainErr)
		}
	}
	errs := []error{drainErr}
	for _, st := range o.built {
		if drainErr != nil {
			// Requests still run on the engines: leave them open.
			st.sup.Wait()
			continue
		}
		errs = append(errs, st.sup.Close())
	}
	if drainErr == nil {
		o.workers.Close()
	}
	o.metrics.unregister(o.opts.Registerer)
	return errors.Join(errs...)
}
