package pool

// A pool's slots: replicas added, removed, lost and replaced while the pool
// runs, and the closing of the engines they leave.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// Reserve returns the Index of a slot that a later Add will fill: a
// replica's engine is built knowing its number.
func (p *Pool) Reserve() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.next
	p.next++
	return i
}

// Add puts a new replica running e in the slot index, which Reserve
// returned: it is healthy, has no bindings, and waiting requests are
// granted slots on it. Add fails, and the caller keeps e, if the pool is
// closed.
func (p *Pool) Add(index int, e engine.Engine) (*Replica, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	r := p.newReplica(fmt.Sprintf("%s/%d", p.Name, index), index, e)
	p.replicas = append(p.replicas, r)
	p.grantLocked()
	p.mu.Unlock()
	return r, nil
}

// Remove empties r's slot: r takes no new bindings, and its engine is
// closed once its last binding is released, or now if it has none.
// Holders still bound to r keep it, and are not told. If no healthy
// replica is left, waiting requests fail with ErrNoReplica. Removing a
// replica no longer in a slot does nothing.
func (p *Pool) Remove(r *Replica) {
	p.mu.Lock()
	i := p.slotLocked(r)
	if p.closed || i < 0 {
		p.mu.Unlock()
		return
	}
	p.replicas = append(p.replicas[:i], p.replicas[i+1:]...)
	closeIt := p.retireLocked(r)
	failWaiters := p.unservableLocked()
	p.mu.Unlock()
	failWaiters()
	if closeIt {
		p.closeRetired(r)
	}
}

// SetEmptyReason records why the pool has no replica, for the error of
// requests refused while it has none (nil to clear): the stage's endpoint
// name resolving to no address, say.
func (p *Pool) SetEmptyReason(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.emptyWhy = err
}

// Empty returns, when the pool has no replica at all, the error Acquire
// fails with (ErrNoReplica and the reason, if one was set), and nil when
// it has one.
func (p *Pool) Empty() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replicas) > 0 {
		return nil
	}
	return p.noReplicaLocked()
}

// noReplica is ErrNoReplica, with the pool's empty reason when it has no
// replica at all.
// unservableLocked takes out of the queue the waiters that no replica can
// serve once none is healthy, and returns the function that fails them
// (to be called once p.mu is released). Waiters for busy replicas fail at
// once; those that came to wait for a restart wait out their own time.
// p.mu is held.
func (p *Pool) unservableLocked() (fail func()) {
	if p.healthyLocked() > 0 {
		return func() {}
	}
	var failed []*waiter
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.restarting {
			kept = append(kept, w)
		} else {
			failed = append(failed, w)
		}
	}
	p.waiters = kept
	err := p.noReplicaLocked()
	return func() {
		for _, w := range failed {
			w.ch <- grant{err: err}
		}
	}
}

func (p *Pool) noReplica() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.noReplicaLocked()
}

func (p *Pool) noReplicaLocked() error {
	if len(p.replicas) == 0 && p.emptyWhy != nil {
		return &NoReplicaError{Why: p.emptyWhy}
	}
	return ErrNoReplica
}

// AnyHealthy returns the first healthy replica in slot order, or nil when
// none is.
func (p *Pool) AnyHealthy() *Replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.replicas {
		if !r.lost {
			return r
		}
	}
	return nil
}

// InSlot returns the replica in the slot numbered index now, or nil when
// that slot is empty (never filled, or removed).
func (p *Pool) InSlot(index int) *Replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.replicas {
		if r.Index == index {
			return r
		}
	}
	return nil
}

// holds reports whether r is in one of the pool's slots.
func (p *Pool) holds(r *Replica) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slotLocked(r) >= 0
}

// slotLocked returns r's position in p.replicas, or -1 when r is in no
// slot.
func (p *Pool) slotLocked(r *Replica) int {
	if r.pool != p || r.retired {
		return -1
	}
	for i, x := range p.replicas {
		if x == r {
			return i
		}
	}
	return -1
}

// retireLocked marks r, just taken out of its slot, retired, and reports
// whether the caller must close its engine now (it has no binding).
func (p *Pool) retireLocked(r *Replica) bool {
	r.retired = true
	if r.load == 0 {
		return p.takeRetiredLocked(r)
	}
	p.retired = append(p.retired, r)
	return false
}

// takeRetiredLocked claims the closing of retired r's engine, and reports
// whether the caller got it (Close may have closed it already).
func (p *Pool) takeRetiredLocked(r *Replica) bool {
	if r.closed {
		return false
	}
	r.closed = true
	for i, x := range p.retired {
		if x == r {
			p.retired = append(p.retired[:i], p.retired[i+1:]...)
			break
		}
	}
	return true
}

func (p *Pool) closeRetired(r *Replica) {
	err := r.Engine.Close()
	if err != nil {
		err = fmt.Errorf("close %s (out of service): %w", r.ID, err)
	}
	if p.RetiredClosed != nil {
		p.RetiredClosed(r, err)
	}
}

// MarkLost takes r out of service for good: holders bound to it are told,
// new requests go to other replicas, and if none is left the waiters fail
// with ErrNoReplica at once rather than wait for a Replace that may never
// succeed (those that came to wait for a restart, RestartWait, wait out
// their own bounded time). It reports whether r was healthy until now, which is true for
// one call per replica.
func (p *Pool) MarkLost(r *Replica, cause error) bool {
	p.mu.Lock()
	if r.lost {
		p.mu.Unlock()
		return false
	}
	r.lost, r.lostErr = true, cause
	holders := make([]Holder, 0, len(r.bound))
	for h := range r.bound {
		holders = append(holders, h)
	}
	failWaiters := p.unservableLocked()
	p.mu.Unlock()
	failWaiters()
	for _, h := range holders {
		h.ReplicaLost(r, cause)
	}
	return true
}

// Replace puts a new replica running e in the slot of old, which must be
// lost and still in its slot: the new replica has old's Index and ID, is
// healthy and has no bindings. Waiting requests are granted slots on it.
// old is retired: its holders release it as usual, and its engine is closed
// once the last of them has, or now when it has no binding left. Replace
// fails, and the caller keeps e, if the pool is closed or old is not a
// lost replica in its slot (ErrRemoved when Remove emptied the slot).
func (p *Pool) Replace(old *Replica, e engine.Engine) (*Replica, error) {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return nil, ErrClosed
	case old.pool != p:
		p.mu.Unlock()
		return nil, fmt.Errorf("replace %s: not a replica of this pool", old.ID)
	case !old.lost:
		p.mu.Unlock()
		return nil, fmt.Errorf("replace %s: the replica is not lost", old.ID)
	}
	i := p.slotLocked(old)
	if i < 0 {
		p.mu.Unlock()
		return nil, fmt.Errorf("replace %s: %w", old.ID, ErrRemoved)
	}
	r := p.newReplica(old.ID, old.Index, e)
	p.replicas[i] = r
	closeOld := p.retireLocked(old)
	p.grantLocked()
	p.mu.Unlock()
	if closeOld {
		p.closeRetired(old)
	}
	return r, nil
}
