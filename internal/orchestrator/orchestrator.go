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
// # Lost replicas
//
// A replica is lost when its engine's Watcher channel closes (a worker
// process exited, a remote server stopped answering) or a Process call
// returns an error wrapping engine.ErrReplicaLost. The requests bound to it
// fail with a *ReplicaLostError; they are not moved. New requests go to the
// stage's other healthy replicas; when none is left, the requests waiting
// in the stage's queue fail at once and new ones are refused as
// unavailable until a replica is back.
//
// Each loss starts a restart loop for the lost replica's slot: after a
// backoff it builds a new engine with the stage's driver (as New did), warms
// it and puts it in the slot (stage.Pool.Replace), where it takes requests
// and is watched in turn. A failed attempt closes what it built and waits
// twice as long before the next, up to Options.RestartBackoffMax. A slot in
// a crash loop (its replica lost again less than twice RestartBackoffMax
// after its restart) starts from twice its last backoff: a stage whose
// replicas keep crashing (an input that crashes every replica it reaches)
// is restarted ever more slowly rather than in a tight loop.
// The lost engine is closed once the last request bound to it has ended.
//
// # Stop order
//
// Shutdown refuses new requests and stops the restart loops' waits, waits
// for in-flight requests (aborting those still running when its context
// ends), then waits for the replica watchers and restart loops (an attempt
// already building an engine finishes first) and closes every pool's
// engines, the lost ones not closed yet included.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
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
	// RestartBackoff is how long a lost replica's slot waits before the
	// first attempt to build a new replica in it; zero means
	// DefaultRestartBackoff, and a negative value disables restarts. The
	// wait doubles after each failed attempt and for a slot in a crash loop
	// (see the package documentation), and has up to a fifth added or taken
	// at random.
	RestartBackoff time.Duration
	// RestartBackoffMax caps that wait; zero means DefaultRestartBackoffMax.
	RestartBackoffMax time.Duration
}

// Defaults of the restart backoff.
const (
	DefaultRestartBackoff    = 200 * time.Millisecond
	DefaultRestartBackoffMax = 30 * time.Second
)

// restartWarmTimeout bounds the warm-up of a replica built to replace a
// lost one; an attempt that outlasts it fails and is retried.
const restartWarmTimeout = 2 * time.Minute

// Orchestrator runs one pipeline.
type Orchestrator struct {
	cfg   *pipeline.Config
	route *pipeline.Route
	opts  Options
	log   *slog.Logger

	pools   []*stage.Pool   // by stage id, the aligner included; nil for a stage not served here
	makers  []*replicaMaker // by stage id, as pools
	built   []*stage.Pool   // the non-nil pools, in id order
	metrics *metrics

	ready   atomic.Bool
	closing chan struct{}      // closed when Shutdown starts
	life    context.Context    // cancelled when Shutdown starts
	stop    context.CancelFunc // cancels life
	closed  chan struct{}      // closed when Shutdown has finished
	loops   sync.WaitGroup     // replica watchers and restart loops; Add only under mu, before closing

	mu        sync.Mutex
	active    map[string]*request
	inflight  int
	idle      chan struct{} // closed and replaced when inflight drops to zero; nil when none waits
	restarted map[slot]restart
	nextID    atomic.Uint64
}

// slot is a replica's place in its stage's pool.
type slot struct{ stage, index int }

// restart is the last successful restart in a slot.
type restart struct {
	at      time.Time
	backoff time.Duration // the backoff it waited, jitter aside
}

// replicaMaker builds the engines of one stage's replicas.
type replicaMaker struct {
	drv    engine.Driver
	spec   engine.Spec
	deploy pipeline.DeployStage
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
	if opts.RestartBackoff == 0 {
		opts.RestartBackoff = DefaultRestartBackoff
	}
	if opts.RestartBackoffMax == 0 {
		opts.RestartBackoffMax = DefaultRestartBackoffMax
	}
	opts.RestartBackoffMax = max(opts.RestartBackoffMax, opts.RestartBackoff)
	o := &Orchestrator{
		cfg: cfg, route: cfg.Route, opts: opts, log: opts.Logger,
		closing:   make(chan struct{}),
		closed:    make(chan struct{}),
		active:    map[string]*request{},
		restarted: map[slot]restart{},
	}
	o.life, o.stop = context.WithCancel(context.Background())
	o.pools = make([]*stage.Pool, cfg.Route.NumIDs())
	o.makers = make([]*replicaMaker, cfg.Route.NumIDs())
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
			o.stop()
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
		o.stop()
		return nil, fmt.Errorf("orchestrator: metrics: %w", err)
	}
	o.metrics = m
	return o, nil
}

// buildPool builds stage id's replicas and remembers how, for restarts.
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
	m := &replicaMaker{drv: drv, spec: spec, deploy: d}
	engines := make([]engine.Engine, 0, d.Replicas)
	for i := range d.Replicas {
		e, err := o.newEngine(m, i)
		if err != nil {
			for _, e := range engines {
				e.Close()
			}
			return nil, fmt.Errorf("stage %d (%s): replica %d: %w", id, name, i, err)
		}
		engines = append(engines, e)
	}
	o.makers[id] = m
	p := stage.NewPool(id, name, engines, d.MaxInflight, d.MaxQueue)
	p.RetiredClosed = func(r *stage.Replica, err error) {
		if err != nil {
			o.log.Warn("closing a lost replica failed", "replica", r.ID, "err", err)
		}
	}
	return p, nil
}

// newEngine builds the engine of replica i of m's stage.
func (o *Orchestrator) newEngine(m *replicaMaker, i int) (engine.Engine, error) {
	spec := m.spec
	spec.Replica = i
	switch m.deploy.Placement {
	case pipeline.PlacementRemote:
		spec.Options = o.replicaOptions(m.deploy.Options)
		spec.Options["endpoint"] = m.deploy.Endpoints[i]
	case pipeline.PlacementProcess:
		spec.Options = o.replicaOptions(m.deploy.Options)
	}
	return m.drv.New(spec)
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
			o.watchReplica(p, r)
		}
	}
	o.ready.Store(true)
	o.log.Info("pipeline ready", "pipeline", o.cfg.Pipeline.Name, "route", o.route.String(), "skipped", o.route.Skipped())
	return nil
}

// goLoop runs f in a goroutine that Shutdown waits for, unless Shutdown
// has started; it reports whether it did.
func (o *Orchestrator) goLoop(f func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.closing:
		return false
	default:
	}
	o.loops.Add(1)
	go func() {
		defer o.loops.Done()
		f()
	}()
	return true
}

// watchReplica watches r until it is lost or Shutdown starts, if its engine
// can be lost.
func (o *Orchestrator) watchReplica(p *stage.Pool, r *stage.Replica) {
	if w, ok := r.Engine.(engine.Watcher); ok {
		o.goLoop(func() { o.watch(p, r, w.Lost()) })
	}
}

func (o *Orchestrator) watch(p *stage.Pool, r *stage.Replica, lost <-chan struct{}) {
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

// markLost takes r out of service and, the first time, starts its slot's
// restart loop.
func (o *Orchestrator) markLost(p *stage.Pool, r *stage.Replica, cause error) {
	if !p.MarkLost(r, cause) {
		return
	}
	o.log.Warn("replica lost", "replica", r.ID, "err", cause)
	if o.opts.RestartBackoff > 0 {
		o.goLoop(func() { o.restart(p, r, cause) })
	}
}

// restart puts a new replica in the slot of lost replica old: it waits a
// backoff, then builds, warms and installs one, retrying with a doubled
// backoff until it succeeds or Shutdown starts.
func (o *Orchestrator) restart(p *stage.Pool, old *stage.Replica, cause error) {
	k := slot{p.Stage, old.Index}
	label := strconv.Itoa(p.Stage)
	backoff := o.firstBackoff(k)
	delay := jitter(backoff)
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-o.closing:
			t.Stop()
			return
		}
		start := time.Now()
		e, err := o.warmEngine(p.Stage, old.Index)
		if err == nil {
			// Noted before the new replica can be lost again, so that the
			// next loop of this slot sees it.
			o.mu.Lock()
			o.restarted[k] = restart{at: time.Now(), backoff: backoff}
			o.mu.Unlock()
			r, err := p.Replace(old, e)
			if err != nil {
				// Only this loop fills the slot, and the pools close after
				// it returns: this is a bug, and retrying would not help.
				o.log.Error("replica restart abandoned", "replica", old.ID, "err", err)
				_ = e.Close()
				return
			}
			o.metrics.restarts.WithLabelValues(label).Inc()
			o.log.Info("replica restarted", "replica", r.ID, "attempt", attempt, "cause", cause, "took", time.Since(start))
			o.watchReplica(p, r)
			return
		}
		if o.life.Err() != nil {
			return // Shutdown interrupted the attempt.
		}
		o.metrics.restartFailures.WithLabelValues(label).Inc()
		backoff = min(2*backoff, o.opts.RestartBackoffMax)
		delay = jitter(backoff)
		o.log.Warn("replica restart failed", "replica", old.ID, "attempt", attempt, "cause", cause, "err", err, "retry_in", delay)
	}
}

// firstBackoff is the wait before the first attempt to restart the replica
// in slot k: the initial backoff, or twice the last one when the slot's
// replica was restarted less than twice the cap ago (a crash loop).
func (o *Orchestrator) firstBackoff(k slot) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	last, ok := o.restarted[k]
	if ok && time.Since(last.at) < 2*o.opts.RestartBackoffMax {
		return min(2*last.backoff, o.opts.RestartBackoffMax)
	}
	return o.opts.RestartBackoff
}

// jitter returns d with up to a fifth of it added or taken at random, so
// that replicas lost together do not restart in lockstep.
func jitter(d time.Duration) time.Duration {
	if f := d / 5; f > 0 {
		return d - f + rand.N(2*f)
	}
	return d
}

// warmEngine builds and warms a new engine for replica i of a stage. When
// it fails it closes what it built.
func (o *Orchestrator) warmEngine(stageID, i int) (engine.Engine, error) {
	e, err := o.newEngine(o.makers[stageID], i)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(o.life, restartWarmTimeout)
	defer cancel()
	if err := e.Warm(ctx); err != nil {
		if cerr := e.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close: %w", cerr))
		}
		return nil, fmt.Errorf("warm: %w", err)
	}
	return e, nil
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
	o.stop()
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
	o.loops.Wait()
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
