package orchestrator

// The stages served here: building each one's supervised replicas, in
// this process or through a Placement, and their snapshot (Stats).

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/batch"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/pool"
)

// Placement builds the replicas of a stage that runs outside this process,
// under a supervisor that restarts the lost ones: packages
// placement/process (worker processes) and placement/remote (stage
// servers) implement it.
type Placement interface {
	// Supervise builds the replicas of the stage that spec describes and
	// d deploys, and returns their supervisor, of the pool cfg describes.
	// It starts nothing: the orchestrator warms the supervisor.
	Supervise(spec engine.Spec, d *pipeline.DeployStage, cfg pool.Config) (*pool.Supervisor, error)
}

// stageRun is one stage served here: its supervised pool and what its
// requests need of it.
type stageRun struct {
	id   int
	name string
	sup  *pool.Supervisor
	pool *pool.Pool
	// inproc is set when the stage's engine runs in this process, so its
	// replicas can check params and name voices here.
	inproc bool
	// duration observes the stage's time per request.
	duration prometheus.Observer
	// retries counts the requests moved to another replica (rebind).
	retries prometheus.Counter
	// replay, when set, lets a request whose replica is lost mid-stream
	// go on on another one (migrate.go); settleReplay sets it at Start.
	replay *engine.Replay
	// driverReplay is the Replay of the stage's engine's driver, when it
	// is registered here; migrate is the deploy entry's key.
	driverReplay *engine.Replay
	migrate      bool
	// migrations counts the stage's moves and the failed ones, by outcome.
	migrations *prometheus.CounterVec
}

// buildStage builds stage id's supervised replicas.
func (o *Orchestrator) buildStage(id int, m *metrics) (*stageRun, error) {
	d := &o.cfg.Deploy.Stages[id]
	name := o.cfg.StageName(id)
	engineName, spec := o.cfg.StageSpec(id, 0)
	fail := func(err error) error { return fmt.Errorf("stage %d (%s): %w", id, name, err) }
	label := strconv.Itoa(id)
	poolCfg := pool.Config{
		Stage: id, Name: name, Replicas: d.Replicas, MaxInflight: d.MaxInflight, MaxQueue: d.MaxQueue,
		RestartBackoff: o.opts.RestartBackoff, RestartBackoffMax: o.opts.RestartBackoffMax, Logger: o.log,
		Restarted:     m.restarts.WithLabelValues(label).Inc,
		RestartFailed: m.restartFailures.WithLabelValues(label).Inc,
	}
	if d.Batch.Max > 1 {
		poolCfg.Batches = batches(d.Batch, m.batchSize.WithLabelValues(label), m.batchWait.WithLabelValues(label))
	}
	var drv engine.Driver
	if d.Placement != pipeline.PlacementRemote {
		// A worker process runs the engine found and checked here, before
		// any process starts.
		var err error
		if drv, err = o.driver(engineName, spec); err != nil {
			return nil, fail(err)
		}
	}
	var sup *pool.Supervisor
	var err error
	if d.Placement == pipeline.PlacementInproc {
		sup, err = pool.Supervise(poolCfg, func(i int) (engine.Engine, error) {
			spec := spec
			spec.Replica = i
			return drv.New(spec)
		})
	} else {
		p := o.opts.Placements[d.Placement]
		if p == nil {
			return nil, fail(fmt.Errorf("placement %s is not available here", d.Placement))
		}
		sup, err = p.Supervise(spec, d, poolCfg)
	}
	if err != nil {
		return nil, fail(err)
	}
	st := &stageRun{id: id, name: name, sup: sup, pool: sup.Pool(), duration: m.stageTime.WithLabelValues(label),
		retries: m.retries.WithLabelValues(label), migrate: d.Migrate,
		migrations: m.migrations.MustCurryWith(prometheus.Labels{"stage": label})}
	st.inproc = d.Placement == pipeline.PlacementInproc
	if d, ok := o.opts.Registry.Lookup(engineName); ok {
		st.driverReplay = d.Replay
	}
	return st, nil
}

// settleReplay decides, once the stage's replicas are warm, whether a
// request whose replica of the stage is lost mid-stream may go on on
// another one: the stage's deploy entry allows it (migrate), its replicas
// can be lost (engine.Watcher: a worker process, a stage server, a stage
// program), and its engine can replay (its replica says so, as an
// engine.Replayer, or else its driver does).
func (st *stageRun) settleReplay() {
	r := st.pool.AnyHealthy()
	if !st.migrate || r == nil {
		return
	}
	if _, ok := r.Engine.(engine.Watcher); !ok {
		return
	}
	if rp, ok := r.Engine.(engine.Replayer); ok {
		if replay, ok := rp.Replay(); ok {
			st.replay = &replay
		}
		return
	}
	st.replay = st.driverReplay
}

// checker returns what checks the stage's sampling params before anything
// runs: a healthy replica's engine, when the stage's engine runs here and
// can (engine.ParamsChecker; every replica checks alike); nil otherwise.
func (st *stageRun) checker() engine.ParamsChecker {
	c, _ := st.engineHere().(engine.ParamsChecker)
	return c
}

// promptChecker returns the stage's engine as a PromptChecker, when it
// runs here and is one.
func (st *stageRun) promptChecker() engine.PromptChecker {
	c, _ := st.engineHere().(engine.PromptChecker)
	return c
}

// engineHere returns a healthy replica's engine when the stage runs in
// this process, else nil.
func (st *stageRun) engineHere() engine.Engine {
	if !st.inproc {
		return nil
	}
	r := st.pool.AnyHealthy()
	if r == nil {
		return nil
	}
	return r.Engine
}

// driver returns the registered driver of engineName, once it has checked
// spec.
func (o *Orchestrator) driver(engineName string, spec engine.Spec) (engine.Driver, error) {
	drv, ok := o.opts.Registry.Lookup(engineName)
	if !ok {
		return drv, fmt.Errorf("engine %q is not available in this build (available: %v)", engineName, o.opts.Registry.Names())
	}
	if drv.Check != nil {
		if err := drv.Check(spec); err != nil {
			return drv, err
		}
	}
	return drv, nil
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
	for rq := range o.live {
		if rq.state.Load() != int32(StateActive) {
			s.Draining++
		}
	}
	o.mu.Unlock()
	for _, st := range o.built {
		ps := st.pool.Stats()
		s.Stages = append(s.Stages, StageStats{
			ID: st.id, Name: st.name, OnRoute: o.route.OnRoute(st.id),
			Queued: ps.Queued, Bindings: ps.Bindings, Healthy: ps.Healthy, Replicas: ps.Replicas,
		})
	}
	return s
}

// batches returns what makes the batch runner of a replica's engine, for
// a stage with batches b: a batch.Queue for an engine that batches
// (engine.Batcher), nothing for one that does not (a replica elsewhere,
// whose own server batches).
func batches(b pipeline.Batch, size, wait prometheus.Observer) func(engine.Engine) engine.BatchRunner {
	// Batches run on as many cores as calls do unbatched: a call of one
	// intra-op thread uses one, and the turns share them.
	opts := batch.Options{Max: b.Max, Delay: b.Delay, Workers: runtime.GOMAXPROCS(0), Observe: func(n int, w time.Duration) {
		size.Observe(float64(n))
		wait.Observe(w.Seconds())
	}}
	return func(e engine.Engine) engine.BatchRunner {
		if be, ok := e.(engine.Batcher); ok {
			return batch.New(be, opts)
		}
		return nil
	}
}
