package pool

// Supervisor: building, warming and watching a pool's replicas, and
// restarting the lost ones.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/omnistage/omnistage/internal/engine"
)

// Builder builds the engine of the replica in a pool's slot index. It is
// called for every slot when the pool is built, and again for a slot whose
// replica was lost.
type Builder func(index int) (engine.Engine, error)

// Defaults of Config.
const (
	DefaultRestartBackoff    = 200 * time.Millisecond
	DefaultRestartBackoffMax = 30 * time.Second
	DefaultRestartWarm       = 2 * time.Minute
	// DefaultRestartWait covers a worker process's restart (0.4 s here)
	// after the first backoff.
	DefaultRestartWait = time.Second
)

// Config is a supervised pool's stage, its bounds and its supervision.
// Every zero field but Stage and Name takes its default.
type Config struct {
	// Stage and Name are the pool's stage: its id and its name, which
	// begins each replica's id ("vocoder/1").
	Stage int
	Name  string
	// Replicas is the number of slots (Supervise; SuperviseMembers keeps
	// one per member).
	Replicas int
	// MaxInflight bounds the requests bound to one replica at once (at
	// least 1); MaxQueue bounds the requests waiting for a replica.
	MaxInflight, MaxQueue int
	// Batches, when set, makes the batch runner of each replica's engine
	// (Replica.Batches); it may return nil, for an engine that does not
	// batch.
	Batches func(engine.Engine) engine.BatchRunner
	// RestartBackoff is how long a lost replica's slot waits before the
	// first attempt to build a new replica in it; zero means
	// DefaultRestartBackoff, and a negative value disables restarts.
	RestartBackoff time.Duration
	// RestartBackoffMax caps that wait; zero means DefaultRestartBackoffMax.
	RestartBackoffMax time.Duration
	// RestartWarm bounds the warm-up of a replica built to replace a lost
	// one; an attempt that outlasts it fails and is retried. Zero means
	// DefaultRestartWarm.
	RestartWarm time.Duration
	// RestartWait is the pool's RestartWait, while restarts are enabled:
	// how long a request waits for a replica when every one is being
	// restarted. Zero means DefaultRestartWait; negative, no wait.
	RestartWait time.Duration
	// Logger gets lost, restarted and failed-restart lines; nil discards.
	Logger *slog.Logger
	// Restarted, when set, is called after each restart that put a new
	// replica in a slot; RestartFailed after each failed attempt. They are
	// for metrics and must not block.
	Restarted, RestartFailed func()
}

// Supervisor keeps the slots of one pool filled with working replicas: it
// builds and warms them, watches those that can be lost (engine.Watcher),
// and rebuilds a lost replica in its slot.
//
// # Restarts
//
// Each loss starts a restart loop for the lost replica's slot: after a
// backoff it builds a new engine with the Builder, warms it and puts it in
// the slot (Pool.Replace), where it takes requests and is watched in turn.
// A failed attempt closes what it built and waits twice as long before the
// next, up to RestartBackoffMax; every wait has up to a fifth added or
// taken at random, so that replicas lost together do not restart in
// lockstep. A slot in a crash loop (its replica lost again less than twice
// RestartBackoffMax after its restart) starts from twice its last backoff:
// a stage whose replicas keep crashing (an input that crashes every
// replica it reaches) is restarted ever more slowly rather than in a tight
// loop. The lost engine is closed once the last request bound to it has
// ended (see Pool.Replace).
//
// # Stop order
//
// Stop ends the waits of the restart loops and the watchers at once (an
// attempt already building an engine finishes first); Close waits for them
// and then closes the pool's engines. The owner calls Stop, waits for the
// requests on the pool to end, then calls Close.
type Supervisor struct {
	pool  *Pool
	build Builder
	opts  Config
	log   *slog.Logger
	disc  interface {
		loop()
		resolve()
	} // a *discovery; nil for a pool of fixed slots

	life    context.Context    // cancelled by Stop
	stop    context.CancelFunc // cancels life
	closing chan struct{}      // closed by Stop
	loops   sync.WaitGroup     // watchers and restart loops; Add only under mu, before closing

	mu        sync.Mutex
	restarted map[int]restart // by slot
}

// restart is the last successful restart in a slot.
type restart struct {
	at      time.Time
	backoff time.Duration // the backoff it waited, jitter aside
}

// Supervise builds a pool of cfg.Replicas replicas of one stage with build
// and returns its supervisor. If a replica cannot be built, the ones built
// are closed and the error names the replica.
func Supervise(cfg Config, build Builder) (*Supervisor, error) {
	engines, err := buildAll(cfg.Replicas, build)
	if err != nil {
		return nil, err
	}
	return newSupervisor(New(cfg, engines), build, cfg), nil
}

// buildAll builds the engines of slots 0..n-1, closing those built if one
// fails.
func buildAll(n int, build Builder) ([]engine.Engine, error) {
	engines := make([]engine.Engine, 0, n)
	for i := range n {
		e, err := build(i)
		if err != nil {
			for _, e := range engines {
				_ = e.Close()
			}
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		engines = append(engines, e)
	}
	return engines, nil
}

func newSupervisor(pool *Pool, build Builder, opts Config) *Supervisor {
	if opts.RestartBackoff == 0 {
		opts.RestartBackoff = DefaultRestartBackoff
	}
	if opts.RestartBackoffMax == 0 {
		opts.RestartBackoffMax = DefaultRestartBackoffMax
	}
	opts.RestartBackoffMax = max(opts.RestartBackoffMax, opts.RestartBackoff)
	if opts.RestartWarm <= 0 {
		opts.RestartWarm = DefaultRestartWarm
	}
	if opts.RestartWait == 0 {
		opts.RestartWait = DefaultRestartWait
	}
	if opts.RestartBackoff > 0 && opts.RestartWait > 0 {
		pool.RestartWait = opts.RestartWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Supervisor{
		pool: pool, build: build, opts: opts, log: opts.Logger,
		closing: make(chan struct{}), restarted: map[int]restart{},
	}
	s.life, s.stop = context.WithCancel(context.Background())
	s.pool.RetiredClosed = func(r *Replica, err error) {
		if err != nil {
			s.log.Warn("closing a replica out of service failed", "replica", r.ID, "err", err)
		}
	}
	return s
}

// Pool returns the supervised pool.
func (s *Supervisor) Pool() *Pool { return s.pool }

// Warm warms every replica of the pool at once and then starts watching
// those that can be lost. It returns the first warm-up error, naming the
// replica.
func (s *Supervisor) Warm(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	replicas := s.pool.Replicas()
	for _, r := range replicas {
		g.Go(func() error {
			start := time.Now()
			if err := r.Engine.Warm(gctx); err != nil {
				return fmt.Errorf("warm %s: %w", r.ID, err)
			}
			s.log.Debug("replica warm", "replica", r.ID, "took", time.Since(start))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, r := range replicas {
		s.watch(r)
	}
	if s.disc != nil {
		s.goLoop(s.disc.loop)
	}
	return nil
}

// goLoop runs f in a goroutine that Close waits for, unless Stop has been
// called; it reports whether it did.
func (s *Supervisor) goLoop(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return false
	default:
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		f()
	}()
	return true
}

// watch watches r until it is lost or Stop is called, if its engine can be
// lost.
func (s *Supervisor) watch(r *Replica) {
	w, ok := r.Engine.(engine.Watcher)
	if !ok {
		return
	}
	s.goLoop(func() {
		select {
		case <-w.Lost():
			s.MarkLost(r, lostCause(r.Engine))
		case <-s.closing:
		}
	})
}

// lostCause is why a watched engine was lost: engine.ErrReplicaLost,
// wrapping what its LostReasoner says, if anything.
func lostCause(e engine.Engine) error {
	lr, ok := e.(engine.LostReasoner)
	if !ok {
		return engine.ErrReplicaLost
	}
	switch err := lr.LostErr(); {
	case err == nil:
		return engine.ErrReplicaLost
	case errors.Is(err, engine.ErrReplicaLost):
		return err
	default:
		return fmt.Errorf("%w: %w", engine.ErrReplicaLost, err)
	}
}

// MarkLost takes r out of service (Pool.MarkLost) and, the first time it
// is called for r, starts its slot's restart loop.
func (s *Supervisor) MarkLost(r *Replica, cause error) {
	if !s.pool.MarkLost(r, cause) {
		return
	}
	s.log.Warn("replica lost", "replica", r.ID, "err", cause)
	if s.opts.RestartBackoff > 0 {
		s.goLoop(func() { s.restart(r, cause) })
	}
}

// restart puts a new replica in the slot of lost replica old: it waits a
// backoff, then builds, warms and installs one, retrying with a doubled
// backoff until it succeeds or Stop is called.
func (s *Supervisor) restart(old *Replica, cause error) {
	backoff := s.firstBackoff(old.Index)
	delay := jitter(backoff)
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			return
		}
		if !s.pool.holds(old) {
			return // Removed while it waited: nothing to restart.
		}
		start := time.Now()
		e, err := s.warmEngine(old.Index)
		if err == nil {
			// Noted before the new replica can be lost again, so that the
			// next loop of this slot sees it.
			s.mu.Lock()
			s.restarted[old.Index] = restart{at: time.Now(), backoff: backoff}
			s.mu.Unlock()
			r, err := s.pool.Replace(old, e)
			if errors.Is(err, ErrRemoved) {
				_ = e.Close()
				return
			}
			if err != nil {
				// Only this loop fills the slot, and the pool closes after
				// it returns: this is a bug, and retrying would not help.
				s.log.Error("replica restart abandoned", "replica", old.ID, "err", err)
				_ = e.Close()
				return
			}
			if s.opts.Restarted != nil {
				s.opts.Restarted()
			}
			s.log.Info("replica restarted", "replica", r.ID, "attempt", attempt, "cause", cause, "backoff", backoff, "took", time.Since(start))
			s.watch(r)
			return
		}
		if s.life.Err() != nil {
			return // Stop interrupted the attempt.
		}
		if s.opts.RestartFailed != nil {
			s.opts.RestartFailed()
		}
		backoff = min(2*backoff, s.opts.RestartBackoffMax)
		delay = jitter(backoff)
		s.log.Warn("replica restart failed", "replica", old.ID, "attempt", attempt, "cause", cause, "err", err, "retry_in", delay)
	}
}

// firstBackoff is the wait before the first attempt to restart the replica
// in slot i: the initial backoff, or twice the last one when the slot's
// replica was restarted less than twice the cap ago (a crash loop).
func (s *Supervisor) firstBackoff(i int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.restarted[i]
	if ok && time.Since(last.at) < 2*s.opts.RestartBackoffMax {
		return min(2*last.backoff, s.opts.RestartBackoffMax)
	}
	return s.opts.RestartBackoff
}

// jitter returns d with up to a fifth of it added or taken at random.
func jitter(d time.Duration) time.Duration {
	if f := d / 5; f > 0 {
		return d - f + rand.N(2*f)
	}
	return d
}

// warmEngine builds and warms a new engine for slot i. When it fails it
// closes what it built.
func (s *Supervisor) warmEngine(i int) (engine.Engine, error) {
	e, err := s.build(i)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.life, s.opts.RestartWarm)
	defer cancel()
	if err := e.Warm(ctx); err != nil {
		if cerr := e.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close: %w", cerr))
		}
		return nil, fmt.Errorf("warm: %w", err)
	}
	return e, nil
}

// Stop ends the restart loops' and watchers' waits at once and keeps new
// ones from starting. It does not wait for them: Close does.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
	default:
		close(s.closing)
		s.stop()
	}
}

// Wait stops the supervisor if Stop was not called and waits for its
// watchers and restart loops (an attempt already building an engine
// finishes first). It leaves the pool's engines open.
func (s *Supervisor) Wait() {
	s.Stop()
	s.loops.Wait()
}

// Close waits for the supervisor (Wait), then closes the pool's engines
// (Pool.Close). The caller ensures no request is still running on the
// pool.
func (s *Supervisor) Close() error {
	s.Wait()
	return s.pool.Close()
}
