// Package pool holds the replica pools of a pipeline's stages and the
// bindings that pin a request to one replica per stage.
//
// # Slots
//
// A pool's replicas sit in slots. A slot's Index is its number, unique in
// the pool for its life: the replicas a pool is built with take 0..n-1,
// and Add gives each new one the next number. Remove empties a slot for
// good (a stage server whose address vanished from DNS): its replica takes
// no new bindings, its holders keep it until they release it, and the
// release of its last binding closes its engine.
//
// # Replacing a lost replica
//
// A lost replica stays lost: its bindings fail and it takes no new ones.
// Replace puts a new replica, built on a fresh engine, in its slot (same
// Index and ID) and retires the lost one. Holders still bound to the
// retired replica release it as usual; its engine is closed by the Release
// of its last binding (or by Replace when it has none), so Close is never
// called while a Process on it may still run, and never twice.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// ErrQueueFull is returned when every replica is busy and the stage's wait
// queue is full: the request is refused at once.
var ErrQueueFull = errors.New("queue full")

// ErrNoReplica is returned when a stage has no healthy replica left.
var ErrNoReplica = errors.New("no healthy replica")

// NoReplicaError is ErrNoReplica with the reason the pool has no replica
// at all (SetEmptyReason): its stage's endpoint name resolving to no
// address, say.
type NoReplicaError struct {
	Why error
}

func (e *NoReplicaError) Error() string { return ErrNoReplica.Error() + ": " + e.Why.Error() }

// Unwrap returns ErrNoReplica and the reason.
func (e *NoReplicaError) Unwrap() []error { return []error{ErrNoReplica, e.Why} }

// ErrRemoved is returned by Replace when the lost replica's slot has been
// removed: there is nothing to put a new replica in.
var ErrRemoved = errors.New("slot removed")

// ErrClosed is returned by a pool that is shutting down.
var ErrClosed = errors.New("pool closed")

// Replica is one running instance of a stage's engine. Its exported fields
// never change: a new engine in the same slot is a new Replica.
type Replica struct {
	// ID names the replica in errors and metrics: "vocoder/0". A replica
	// put in a lost one's slot has the same ID and Index.
	ID     string
	Stage  int
	Index  int
	Engine engine.Engine
	// Batches runs the units of work the requests bound to the replica
	// hand its engine in batches (Config.Batches); nil when its stage
	// does not batch.
	Batches engine.BatchRunner

	pool *Pool
	// Guarded by pool.mu.
	load    int
	lost    bool
	lostErr error
	bound   map[Holder]struct{}
	retired bool // replaced or removed: no longer in the pool's slots
	closed  bool // Engine.Close has been called, or is being called
}

// Holder is what a binding is held by: a request that must hear when its
// replica is lost.
type Holder interface {
	// ReplicaLost is called, without locks held, when a replica the holder
	// is bound to is lost. It must not block.
	ReplicaLost(r *Replica, err error)
}

// Pool is the replicas of one stage, with a bounded queue of requests
// waiting for a free replica.
type Pool struct {
	Stage int
	Name  string
	// RetiredClosed, when not nil, is called without locks held with the
	// result of closing a retired replica's engine, when Replace or Release
	// closes it (Close reports its own). Set it before the pool is used.
	RetiredClosed func(r *Replica, err error)
	// RestartWait, when positive, is how long Acquire waits, in the queue,
	// for a replica when every replica is lost and some are still in
	// their slots (being restarted: a worker back within a second), rather
	// than fail at once with ErrNoReplica. Set it before the pool is used.
	RestartWait time.Duration

	mu          sync.Mutex
	replicas    []*Replica // in slot order; Replace swaps an entry, Remove drops one
	next        int        // the Index of the next slot Add makes
	turn        int        // where pickLocked starts looking
	retired     []*Replica // replaced or removed replicas whose engine is not closed yet
	emptyWhy    error      // why the pool has no replica, when it has none (SetEmptyReason)
	maxInflight int
	maxQueue    int
	batches     func(engine.Engine) engine.BatchRunner // Config.Batches
	waiters     []*waiter
	closed      bool
}

// newReplica returns the replica of slot index, named id, running e.
func (p *Pool) newReplica(id string, index int, e engine.Engine) *Replica {
	r := &Replica{ID: id, Stage: p.Stage, Index: index, Engine: e, pool: p, bound: map[Holder]struct{}{}}
	if p.batches != nil {
		r.Batches = p.batches(e)
	}
	return r
}

type waiter struct {
	holder     Holder
	ch         chan grant // buffered, capacity 1
	restarting bool       // waits, for RestartWait, for a restarted replica
}

type grant struct {
	r   *Replica
	err error
}

// New returns a pool of cfg's stage over engines, one replica each, with
// cfg's bounds (cfg.Replicas and the supervision are not its concern).
func New(cfg Config, engines []engine.Engine) *Pool {
	p := &Pool{Stage: cfg.Stage, Name: cfg.Name, maxInflight: max(cfg.MaxInflight, 1), maxQueue: max(cfg.MaxQueue, 0), batches: cfg.Batches}
	for i, e := range engines {
		p.replicas = append(p.replicas, p.newReplica(fmt.Sprintf("%s/%d", cfg.Name, i), i, e))
	}
	p.next = len(engines)
	return p
}

// Replicas returns the replicas in the pool's slots now, in slot order.
func (p *Pool) Replicas() []*Replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Replica(nil), p.replicas...)
}

// Acquire binds h to the least-loaded healthy replica with a free slot,
// waiting in the stage's queue if all are busy. It fails at once with
// ErrQueueFull when the queue is full and with ErrNoReplica when no replica
// is healthy (unless they are being restarted and RestartWait is set: then
// it waits that long for one); it returns ctx's error if ctx ends while
// waiting.
func (p *Pool) Acquire(ctx context.Context, h Holder) (*Replica, error) {
	return p.acquire(ctx, h, p.RestartWait)
}

// AcquireHealthy is Acquire without the wait for restarted replicas: when
// no replica is healthy it fails at once with ErrNoReplica, whatever
// RestartWait says. A request that lost its replica mid-stream moves to
// another one that is up, or fails as it would have.
func (p *Pool) AcquireHealthy(ctx context.Context, h Holder) (*Replica, error) {
	return p.acquire(ctx, h, 0)
}

// acquire is Acquire, waiting at most restartWait for a restarted replica
// when none is healthy.
func (p *Pool) acquire(ctx context.Context, h Holder, restartWait time.Duration) (*Replica, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if r := p.pickLocked(); r != nil {
		p.bindLocked(r, h)
		p.mu.Unlock()
		return r, nil
	}
	var restarting <-chan time.Time
	if p.healthyLocked() == 0 {
		if restartWait <= 0 || len(p.replicas) == 0 || len(p.waiters) >= p.maxQueue {
			err := p.noReplicaLocked()
			p.mu.Unlock()
			return nil, err
		}
		// Every replica is being restarted: wait a little for one.
		t := time.NewTimer(restartWait)
		defer t.Stop()
		restarting = t.C
	}
	if len(p.waiters) >= p.maxQueue {
		p.mu.Unlock()
		return nil, ErrQueueFull
	}
	w := &waiter{holder: h, ch: make(chan grant, 1), restarting: restarting != nil}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()

	select {
	case g := <-w.ch:
		return g.r, g.err
	case <-ctx.Done():
		return nil, p.leave(w, ctx.Err())
	case <-restarting:
		return nil, p.leave(w, p.noReplica())
	}
}

// leave takes waiter w out of the queue and returns err; a grant that
// raced with its leaving is given back.
func (p *Pool) leave(w *waiter, err error) error {
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.mu.Unlock()
			return err
		}
	}
	p.mu.Unlock()
	if g := <-w.ch; g.r != nil {
		p.Release(g.r, w.holder)
	}
	return err
}

// pickLocked returns the least-loaded healthy replica with a free slot.
// Among equally loaded ones it takes turns, starting after the last one
// picked: at low load every replica takes requests (a replica just added
// too), not only the first.
func (p *Pool) pickLocked() *Replica {
	var best *Replica
	bestAt := 0
	n := len(p.replicas)
	for k := range n {
		i := (p.turn + k) % n
		r := p.replicas[i]
		if r.lost || r.load >= p.maxInflight {
			continue
		}
		if best == nil || r.load < best.load {
			best, bestAt = r, i
		}
	}
	if best != nil {
		p.turn = bestAt + 1
	}
	return best
}

func (p *Pool) healthyLocked() int {
	n := 0
	for _, r := range p.replicas {
		if !r.lost {
			n++
		}
	}
	return n
}

func (p *Pool) bindLocked(r *Replica, h Holder) {
	r.load++
	r.bound[h] = struct{}{}
}

// Release ends h's binding to r and hands the freed slot to the first
// waiter, if any. r may have been retired by Replace since h was bound to
// it: the release of its last binding closes its engine.
func (p *Pool) Release(r *Replica, h Holder) {
	p.mu.Lock()
	if _, ok := r.bound[h]; !ok {
		p.mu.Unlock()
		return
	}
	delete(r.bound, h)
	r.load--
	if r.retired {
		closeIt := r.load == 0 && p.takeRetiredLocked(r)
		p.mu.Unlock()
		if closeIt {
			p.closeRetired(r)
		}
		return
	}
	p.grantLocked()
	p.mu.Unlock()
}

// grantLocked hands free slots to waiters in order.
func (p *Pool) grantLocked() {
	for len(p.waiters) > 0 {
		r := p.pickLocked()
		if r == nil {
			return
		}
		w := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.bindLocked(r, w.holder)
		w.ch <- grant{r: r}
	}
}

// Healthy reports whether r is still in service.
func (r *Replica) Healthy() bool {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	return !r.lost
}

// Stats is a snapshot of a pool.
type Stats struct {
	Queued   int
	Bindings int
	Healthy  int
	Replicas int
}

// Stats returns a snapshot of the pool's load. Bindings include those
// still held on retired replicas.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Queued: len(p.waiters), Healthy: p.healthyLocked(), Replicas: len(p.replicas)}
	for _, r := range p.replicas {
		s.Bindings += r.load
	}
	for _, r := range p.retired {
		s.Bindings += r.load
	}
	return s
}

// Close refuses new bindings, fails the waiters and closes every engine not
// closed yet: the replicas' in the slots and the retired ones'. The caller
// ensures no request is still running on the pool. A second Close closes
// nothing.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	waiters := p.waiters
	p.waiters = nil
	var toClose []*Replica
	for _, rs := range [][]*Replica{p.replicas, p.retired} {
		for _, r := range rs {
			if !r.closed {
				r.closed = true
				toClose = append(toClose, r)
			}
		}
	}
	p.retired = nil
	p.mu.Unlock()
	for _, w := range waiters {
		w.ch <- grant{err: ErrClosed}
	}
	var errs []error
	for _, r := range toClose {
		if err := r.Engine.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", r.ID, err))
		}
	}
	return errors.Join(errs...)
}
