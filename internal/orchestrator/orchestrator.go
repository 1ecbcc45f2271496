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
// # Stop order
//
// Shutdown refuses new requests, waits for in-flight ones (aborting those
// still running when its context ends), then stops the replica watchers and
// closes every pool's engines.
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
	"golang.org/x/sync/errgroup"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/stage"
)

// Options configure an Orchestrator.
type Options struct {
	// Registry maps engine names to drivers.
	Registry *engine.Registry
	// Registerer receives the orchestrator's metrics; nil for none.
	Registerer prometheus.Registerer
	// Logger gets lifecycle and per-request lines; nil discards them.
	Logger *slog.Logger
	// RemoteOptions are added to the options of every replica that runs
	// outside this process: remote replicas (the payload codec, so remote
	// hops are signed with the server's key) and worker processes (where
	// their output goes).
	RemoteOptions engine.Options
	// Stages, when not nil, limits the stages built and served to these ids
	// (a headless stage server builds only its own). Requests that need
	// another stage are refused as unavailable.
	Stages []int
}

// Orchestrator runs one pipeline.
type Orchestrator struct {
	cfg   *pipeline.Config
	route *pipeline.Route
	opts  Options
	log   *slog.Logger

	pools   []*stage.Pool // by stage id, the aligner included; nil for a stage not served here
	built   []*stage.Pool // the non-nil pools, in id order
	metrics *metrics

	ready    atomic.Bool
	closing  chan struct{} // closed when Shutdown starts
	closed   chan struct{} // closed when Shutdown has finished
	watchers sync.WaitGroup

	mu       sync.Mutex
	active   map[string]*request
	inflight int
	idle     chan struct{} // closed and replaced when inflight drops to zero; nil when none waits
	nextID   atomic.Uint64
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
	o := &Orchestrator{
		cfg: cfg, route: cfg.Route, opts: opts, log: opts.Logger,
		closing: make(chan struct{}),
		closed:  make(chan struct{}),
		active:  map[string]*request{},
	}
	o.pools = make([]*stage.Pool, cfg.Route.NumIDs())
	for _, id := range opts.Stages {
		if id < 0 || id >= len(o.pools) {
			return nil, fmt.Errorf("orchestrator: no stage %d to serve (stage ids are 0..%d)", id, len(o.pools)-1)
		}
	}
	for id := range cfg.Route.NumIDs() {
		if opts.Stages != nil && !slices.Contains(opts.Stages, id) {
			continue
		}
		pool, err := o.buildPool(id)
		if err != nil {
			for _, p := range o.built {
				p.Close()
			}
			return nil, err
		}
		o.pools[id] = pool
		o.built = append(o.built, pool)
	}
	m, err := newMetrics(opts.Registerer, o.built)
	if err != nil {
		for _, p := range o.built {
			p.Close()
		}
		return nil, fmt.Errorf("orchestrator: metrics: %w", err)
	}
	o.metrics = m
	return o, nil
}

func (o *Orchestrator) buildPool(id int) (*stage.Pool, error) {
	d := o.cfg.Deploy.Stages[id]
	name := o.cfg.StageName(id)
	engineName, spec := o.cfg.StageSpec(id, 0)
	if d.Placement == pipeline.PlacementRemote {
		// Each replica is one endpoint: a headless stage server running
		// this stage, reached through the remote engine.
		engineName = "remote"
	}
	drv, ok := o.opts.Registry.Lookup(engineName)
	if !ok {
		return nil, fmt.Errorf("stage %d (%s): engine %q is not available in this build (available: %v)", id, name, engineName, o.opts.Registry.Names())
	}
	if drv.Check != nil {
		if err := drv.Check(spec); err != nil {
			return nil, fmt.Errorf("stage %d (%s): %w", id, name, err)
		}
	}
	if d.Placement == pipeline.PlacementProcess {
		// Each replica is a worker process of this program that runs the
		// stage's engine (found and checked above, before any process
		// starts), reached through the worker engine.
		if drv, ok = o.opts.Registry.Lookup("worker"); !ok {
			return nil, fmt.Errorf("stage %d (%s): placement process needs the worker engine, which is not available in this build", id, name)
		}
	}
	engines := make([]engine.Engine, 0, d.Replicas)
	for i := range d.Replicas {
		spec.Replica = i
		switch d.Placement {
		case pipeline.PlacementRemote:
			spec.Options = o.replicaOptions(d.Options)
			spec.Options["endpoint"] = d.Endpoints[i]
		case pipeline.PlacementProcess:
			spec.Options = o.replicaOptions(d.Options)
		}
		e, err := drv.New(spec)
		if err != nil {
			for _, e := range engines {
				e.Close()
			}
			return nil, fmt.Errorf("stage %d (%s): replica %d: %w", id, name, i, err)
		}
		engines = append(engines, e)
	}
	return stage.NewPool(id, name, engines, d.MaxInflight, d.MaxQueue), nil
}

// replicaOptions are the options of a replica that runs outside this
// process (remote or worker): the stage's own from the config, then what
// the runtime supplies (which wins): Options.RemoteOptions and the
// pipeline it serves. A remote replica also gets its endpoint.
func (o *Orchestrator) replicaOptions(opts engine.Options) engine.Options {
	out := engine.Options{}
	for k, v := range opts {
		out[k] = v
	}
	for k, v := range o.opts.RemoteOptions {
		out[k] = v
	}
	out["pipeline"] = o.cfg
	return out
}

// Start warms every replica of every stage, skipped stages included, and
// starts watching replicas that can be lost. The orchestrator is ready when
// Start returns nil.
func (o *Orchestrator) Start(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range o.built {
		for _, r := range p.Replicas() {
			g.Go(func() error {
				start := time.Now()
				if err := r.Engine.Warm(gctx); err != nil {
					return fmt.Errorf("warm %s: %w", r.ID, err)
				}
				o.log.Debug("replica warm", "replica", r.ID, "took", time.Since(start))
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	for _, p := range o.built {
		for _, r := range p.Replicas() {
			if w, ok := r.Engine.(engine.Watcher); ok {
				o.watchers.Add(1)
				go o.watch(p, r, w.Lost())
			}
		}
	}
	o.ready.Store(true)
	o.log.Info("pipeline ready", "pipeline", o.cfg.Pipeline.Name, "route", o.route.String(), "skipped", o.route.Skipped())
	return nil
}

func (o *Orchestrator) watch(p *stage.Pool, r *stage.Replica, lost <-chan struct{}) {
	defer o.watchers.Done()
	select {
	case <-lost:
		cause := engine.ErrReplicaLost
		if lr, ok := r.Engine.(engine.LostReasoner); ok {
			if err := lr.LostErr(); err != nil && !errors.Is(err, engine.ErrReplicaLost) {
				cause = fmt.Errorf("%w: %w", engine.ErrReplicaLost, err)
			} else if err != nil {
				cause = err
			}
		}
		o.markLost(p, r, cause)
	case <-o.closing:
	}
}

func (o *Orchestrator) markLost(p *stage.Pool, r *stage.Replica, cause error) {
	if p.MarkLost(r, cause) {
		o.log.Warn("replica lost", "replica", r.ID, "err", cause)
	}
}

// Ready reports whether every replica has warmed up and the orchestrator
// takes requests.
func (o *Orchestrator) Ready() bool { return o.ready.Load() }

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

	var drainErr error
	if err := o.waitIdle(ctx); err != nil {
		o.mu.Lock()
		reqs := make([]*request, 0, len(o.active))
		for _, rq := range o.active {
			reqs = append(reqs, rq)
		}
		o.mu.Unlock()
		for _, rq := range reqs {
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
	o.watchers.Wait()
	errs := []error{drainErr}
	if drainErr == nil {
		for _, p := range o.built {
			errs = append(errs, p.Close())
		}
	}
	o.metrics.unregister(o.opts.Registerer)
	return errors.Join(errs...)
}

// waitIdle waits until no request is in flight.
func (o *Orchestrator) waitIdle(ctx context.Context) error {
	for {
		o.mu.Lock()
		if o.inflight == 0 {
			o.mu.Unlock()
			return nil
		}
		if o.idle == nil {
			o.idle = make(chan struct{})
		}
		idle := o.idle
		o.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// StageStats is a snapshot of one stage.
type StageStats struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	OnRoute  bool   `json:"on_route"`
	Queued   int    `json:"queued"`
	Bindings int    `json:"bindings"`
	Healthy  int    `json:"healthy_replicas"`
	Replicas int    `json:"replicas"`
}

// Stats is a snapshot of the orchestrator.
type Stats struct {
	InFlight int          `json:"inflight"`
	Draining int          `json:"draining"`
	Stages   []StageStats `json:"stages"`
}

// Bindings returns the total number of bindings held across stages.
func (s Stats) Bindings() int {
	n := 0
	for _, st := range s.Stages {
		n += st.Bindings
	}
	return n
}

// Stats returns in-flight requests, draining ones, and each stage's queue
// depth and bindings held.
func (o *Orchestrator) Stats() Stats {
	o.mu.Lock()
	s := Stats{InFlight: o.inflight}
	for _, rq := range o.active {
		if rq.state.Load() != int32(StateActive) {
			s.Draining++
		}
	}
	o.mu.Unlock()
	for _, p := range o.built {
		ps := p.Stats()
		s.Stages = append(s.Stages, StageStats{
			ID: p.Stage, Name: p.Name, OnRoute: o.route.OnRoute(p.Stage),
			Queued: ps.Queued, Bindings: ps.Bindings, Healthy: ps.Healthy, Replicas: ps.Replicas,
		})
	}
	return s
}
