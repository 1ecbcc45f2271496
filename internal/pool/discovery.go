package pool

// Members: a pool whose slots follow a set of members that changes while it
// runs.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// ErrNoMembers is wrapped by a Members.Resolve error that means the stage
// has no member at all (a name that resolves to no address), rather than
// that they could not be found out this time.
var ErrNoMembers = errors.New("no members")

// Member is one member of a set that a pool's slots follow (Members): a
// value that names one replica (a stage server at one address, say).
// Members are told apart by ==, and ordered and logged by String.
type Member interface {
	comparable
	String() string
}

// Members makes a pool's slots follow a set of members that changes while
// it runs: the addresses a stage server's DNS name resolves to, one
// replica each.
type Members[M Member] struct {
	// Interval is how often Resolve is called after the first time.
	Interval time.Duration
	// Resolve returns the members there are now, each naming one replica.
	// An error keeps the members there are, unless it wraps ErrNoMembers:
	// then there are none. Either error is the reason requests are refused
	// with while there is none.
	Resolve func(ctx context.Context) ([]M, error)
	// Build builds the engine of the replica of member m in slot index.
	Build func(m M, index int) (engine.Engine, error)
}

// resolveTimeout bounds one Resolve.
const resolveTimeout = 5 * time.Second

// SuperviseMembers builds a pool of one stage with a replica per member
// that m.Resolve gives now, and returns its supervisor. Once warm (Warm),
// the supervisor calls Resolve every m.Interval: a new member becomes a
// replica once it is built and warm, and the replica of a member that has
// gone is removed from its slot (Pool.Remove: it takes no new request and
// its engine is closed when its last bound request ends, never cut
// mid-request). A lost replica of a member still there is restarted as in
// any pool. Resolving to no member at all is not an error: the pool is
// empty, and Acquire fails with ErrNoReplica and the reason, until a
// member comes. Other errors of the first Resolve, and the error of
// building a replica, are returned.
func SuperviseMembers[M Member](ctx context.Context, cfg Config, m Members[M]) (*Supervisor, error) {
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	keys, why := m.Resolve(rctx)
	cancel()
	if why != nil && !errors.Is(why, ErrNoMembers) {
		return nil, why
	}
	keys = sortedSet(keys)
	d := &discovery[M]{m: m, slots: map[M]int{}, keys: map[int]M{}, pending: map[M]bool{}}
	build := func(i int) (engine.Engine, error) {
		d.mu.Lock()
		key, ok := d.keys[i]
		d.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("slot %d has no member", i)
		}
		return m.Build(key, i)
	}
	d.wanted = map[M]bool{}
	for i, k := range keys {
		d.slots[k], d.keys[i], d.wanted[k] = i, k, true
	}
	engines, err := buildAll(len(keys), build)
	if err != nil {
		return nil, err
	}
	pool := New(cfg, engines)
	pool.SetEmptyReason(why)
	s := newSupervisor(pool, build, cfg)
	d.s = s
	s.disc = d
	return s, nil
}

// discovery is a Supervisor's side of Members.
type discovery[M Member] struct {
	m Members[M]
	s *Supervisor

	mu      sync.Mutex
	slots   map[M]int  // member → slot index, for members with a replica
	keys    map[int]M  // slot index → member, for restarts
	pending map[M]bool // members whose replica is being built
	wanted  map[M]bool // the members of the last Resolve that answered
}

// loop resolves every Interval until the supervisor stops.
func (d *discovery[M]) loop() {
	t := time.NewTicker(d.m.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-d.s.closing:
			return
		}
		d.resolve()
	}
}

// resolve calls Resolve once and adds and removes replicas to follow it.
func (d *discovery[M]) resolve() {
	ctx, cancel := context.WithTimeout(d.s.life, resolveTimeout)
	keys, err := d.m.Resolve(ctx)
	cancel()
	if d.s.life.Err() != nil {
		return
	}
	if err != nil && !errors.Is(err, ErrNoMembers) {
		// Not known this time: keep the members there are.
		d.s.log.Warn("resolving the stage's members failed", "stage", d.s.pool.Name, "err", err)
		if len(d.s.pool.Replicas()) == 0 {
			d.s.pool.SetEmptyReason(err)
		}
		return
	}
	keys = sortedSet(keys)
	d.s.pool.SetEmptyReason(err)

	d.mu.Lock()
	d.wanted = map[M]bool{}
	var add []M
	for _, k := range keys {
		d.wanted[k] = true
		if _, ok := d.slots[k]; !ok && !d.pending[k] {
			d.pending[k] = true
			add = append(add, k)
		}
	}
	var remove []int
	for k, i := range d.slots {
		if !d.wanted[k] {
			delete(d.slots, k)
			delete(d.keys, i)
			remove = append(remove, i)
		}
	}
	d.mu.Unlock()

	for _, i := range remove {
		if r := d.s.pool.InSlot(i); r != nil {
			d.s.log.Info("replica removed: its member is gone", "replica", r.ID)
			d.s.pool.Remove(r)
		}
	}
	for _, k := range add {
		if !d.s.goLoop(func() { d.add(k) }) {
			return
		}
	}
}

// add builds, warms and adds the replica of new member key. A failure is
// logged, and the next Resolve that still lists the member tries again.
func (d *discovery[M]) add(key M) {
	i := d.s.pool.Reserve()
	d.mu.Lock()
	d.keys[i] = key
	d.mu.Unlock()
	start := time.Now()
	e, err := d.s.warmEngine(i)
	d.mu.Lock()
	delete(d.pending, key)
	if err != nil || !d.wanted[key] {
		delete(d.keys, i)
		d.mu.Unlock()
		switch {
		case err != nil && d.s.life.Err() == nil:
			d.s.log.Warn("new member's replica failed", "stage", d.s.pool.Name, "member", key.String(), "err", err)
		case err == nil:
			_ = e.Close() // Gone while it warmed.
		}
		return
	}
	// Added under d.mu, so that a Resolve that drops the member now finds
	// its replica in the slot to remove.
	r, err := d.s.pool.Add(i, e)
	if err != nil {
		delete(d.keys, i)
		d.mu.Unlock()
		_ = e.Close()
		return
	}
	d.slots[key] = i
	d.mu.Unlock()
	d.s.log.Info("replica added for a new member", "replica", r.ID, "member", key.String(), "took", time.Since(start))
	d.s.watch(r)
}

// sortedSet returns members sorted by name, without repeats.
func sortedSet[M Member](members []M) []M {
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b M) int { return cmp.Compare(a.String(), b.String()) })
	return slices.Compact(members)
}
