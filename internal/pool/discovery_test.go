package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testkit"
)

// memberEngine is a replica of one member; it can be lost, and its warm-up
// can be held.
type memberEngine struct {
	key      string
	warmGate chan struct{} // nil: warm at once
	lost     chan struct{}

	mu     sync.Mutex
	closed bool
}

func (e *memberEngine) Warm(ctx context.Context) error {
	if e.warmGate == nil {
		return nil
	}
	select {
	case <-e.warmGate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (e *memberEngine) Process(context.Context, *engine.Job) error { return nil }
func (e *memberEngine) Lost() <-chan struct{}                      { return e.lost }
func (e *memberEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}
func (e *memberEngine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// members is a Members whose answer the test sets; it keeps every engine
// it built.
type members struct {
	mu       sync.Mutex
	keys     []string
	err      error
	warmGate chan struct{}
	built    []*memberEngine
}

func (m *members) set(err error, keys ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys, m.err = keys, err
}

func (m *members) engines(key string) []*memberEngine {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*memberEngine
	for _, e := range m.built {
		if e.key == key {
			out = append(out, e)
		}
	}
	return out
}

// memberName is the tests' Member.
type memberName string

func (n memberName) String() string { return string(n) }

func (m *members) config() Members[memberName] {
	return Members[memberName]{
		Interval: time.Hour, // the tests call resolve themselves
		Resolve: func(context.Context) ([]memberName, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			names := make([]memberName, len(m.keys))
			for i, k := range m.keys {
				names[i] = memberName(k)
			}
			return names, m.err
		},
		Build: func(name memberName, index int) (engine.Engine, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			e := &memberEngine{key: string(name), warmGate: m.warmGate, lost: make(chan struct{})}
			m.built = append(m.built, e)
			return e, nil
		},
	}
}

func superviseMembers(t *testing.T, m *members) *Supervisor {
	t.Helper()
	s, err := SuperviseMembers(context.Background(), Config{Stage: 1, Name: "vocoder", MaxInflight: 1, MaxQueue: 4, RestartBackoff: time.Millisecond}, m.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := s.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// memberKeys returns the member key of each replica in the pool's slots.
func memberKeys(p *Pool) []string {
	var keys []string
	for _, r := range p.Replicas() {
		keys = append(keys, r.Engine.(*memberEngine).key)
	}
	slices.Sort(keys)
	return keys
}

func waitMembers(t *testing.T, p *Pool, want ...string) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("replicas of %v", want), func() bool { return slices.Equal(memberKeys(p), want) })
}

func TestMembersFollowResolve(t *testing.T) {
	m := &members{}
	m.set(nil, "b", "a", "a")
	s := superviseMembers(t, m)
	p := s.Pool()
	waitMembers(t, p, "a", "b")
	if ids := []string{p.Replicas()[0].ID, p.Replicas()[1].ID}; !slices.Equal(ids, []string{"vocoder/0", "vocoder/1"}) {
		t.Errorf("first replicas are %v, want vocoder/0 and vocoder/1 in sorted member order", ids)
	}

	// A new member joins once warm; its slot has the next number.
	m.set(nil, "a", "b", "c")
	s.disc.resolve()
	waitMembers(t, p, "a", "b", "c")
	if r := p.InSlot(2); r == nil || r.ID != "vocoder/2" {
		t.Errorf("slot 2 holds %v, want vocoder/2", r)
	}

	// A member that goes, while a request is bound to its replica: the
	// replica takes no new request but is closed only when released.
	h := &holder{}
	var bound *Replica
	for {
		r, err := p.Acquire(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		if r.Engine.(*memberEngine).key == "b" {
			bound = r
			break
		}
		defer p.Release(r, h)
	}
	m.set(nil, "a", "c")
	s.disc.resolve()
	waitMembers(t, p, "a", "c")
	eb := bound.Engine.(*memberEngine)
	if eb.isClosed() {
		t.Fatal("a removed replica was closed while a request was bound to it")
	}
	p.Release(bound, h)
	if !eb.isClosed() {
		t.Fatal("a removed replica was not closed when its last binding was released")
	}
	if st := p.Stats(); st.Replicas != 2 || st.Healthy != 2 {
		t.Errorf("stats %+v, want 2 replicas, 2 healthy", st)
	}
}

func TestMembersNone(t *testing.T) {
	m := &members{}
	none := fmt.Errorf("vocoder.svc resolves to no address: %w", ErrNoMembers)
	m.set(none)
	s := superviseMembers(t, m)
	p := s.Pool()
	_, err := p.Acquire(context.Background(), &holder{})
	if !errors.Is(err, ErrNoReplica) || !strings.Contains(err.Error(), "vocoder.svc resolves to no address") {
		t.Fatalf("Acquire on an empty pool: %v, want ErrNoReplica naming the reason", err)
	}

	m.set(nil, "a")
	s.disc.resolve()
	waitMembers(t, p, "a")
	r, err := p.Acquire(context.Background(), &holder{})
	if err != nil {
		t.Fatalf("Acquire after a member came: %v", err)
	}
	p.Release(r, &holder{})

	// A failed lookup keeps the members; one that finds none removes them.
	m.set(errors.New("dns server timed out"))
	s.disc.resolve()
	if got := memberKeys(p); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after a failed lookup the replicas are %v, want [a]", got)
	}
	m.set(none)
	s.disc.resolve()
	waitMembers(t, p)
	if _, err := p.Acquire(context.Background(), &holder{}); !strings.Contains(fmt.Sprint(err), "resolves to no address") {
		t.Fatalf("Acquire after the members went: %v", err)
	}
}

func TestMembersGoneWhileWarming(t *testing.T) {
	m := &members{}
	m.set(nil, "a")
	s := superviseMembers(t, m)
	p := s.Pool()

	m.mu.Lock()
	m.warmGate = make(chan struct{})
	m.mu.Unlock()
	m.set(nil, "a", "b")
	s.disc.resolve()
	testkit.Eventually(t, "b's replica building", func() bool { return len(m.engines("b")) == 1 })
	m.set(nil, "a")
	s.disc.resolve()
	close(m.warmGate)
	testkit.Eventually(t, "b's replica closed", func() bool { return m.engines("b")[0].isClosed() })
	if got := memberKeys(p); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("replicas %v, want [a]: a member gone while its replica warmed must not join", got)
	}
}

func TestMembersLostReplica(t *testing.T) {
	m := &members{}
	m.set(nil, "a", "b")
	s := superviseMembers(t, m)
	p := s.Pool()

	// A lost replica of a member still there is rebuilt for that member.
	close(m.engines("a")[0].lost)
	testkit.Eventually(t, "a's replica rebuilt", func() bool {
		r := p.InSlot(0)
		return len(m.engines("a")) == 2 && r != nil && r.Healthy() && r.Engine == m.engines("a")[1]
	})

	// One whose member went is not: its restart loop ends at once.
	b := p.InSlot(1)
	m.set(nil, "a")
	s.disc.resolve()
	waitMembers(t, p, "a")
	p.MarkLost(b, engine.ErrReplicaLost)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.restart(b, engine.ErrReplicaLost)
	}()
	testkit.Eventually(t, "the restart loop of a removed replica to end", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if n := len(m.engines("b")); n != 1 {
		t.Fatalf("%d replicas built for member b, gone before its replica was lost; want 1", n)
	}
}
