package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type nopEngine struct{ closed int }

func (e *nopEngine) Warm(context.Context) error                 { return nil }
func (e *nopEngine) Process(context.Context, *engine.Job) error { return nil }
func (e *nopEngine) Close() error                               { e.closed++; return nil }

type holder struct {
	mu   sync.Mutex
	lost []string
}

func (h *holder) ReplicaLost(r *Replica, err error) {
	h.mu.Lock()
	h.lost = append(h.lost, r.ID)
	h.mu.Unlock()
}

func newPool(n, inflight, queue int) *Pool {
	var es []engine.Engine
	for range n {
		es = append(es, &nopEngine{})
	}
	return New(Config{Stage: 1, Name: "voc", MaxInflight: inflight, MaxQueue: queue}, es)
}

func TestLeastLoaded(t *testing.T) {
	p := newPool(3, 2, 0)
	ctx := context.Background()
	counts := map[string]int{}
	var hs []*holder
	for range 6 {
		h := &holder{}
		r, err := p.Acquire(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		counts[r.ID]++
	}
	for id, n := range counts {
		if n != 2 {
			t.Errorf("replica %s got %d bindings, want 2 each", id, n)
		}
	}
	if _, err := p.Acquire(ctx, &holder{}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("full pool with no queue: err = %v", err)
	}
	if st := p.Stats(); st.Bindings != 6 || st.Queued != 0 {
		t.Errorf("stats = %+v", st)
	}
	_ = hs
}

// TestTiesTakeTurns checks that requests one at a time go to every
// replica in turn, not all to the first.
func TestTiesTakeTurns(t *testing.T) {
	p := newPool(3, 2, 0)
	var got []string
	for range 6 {
		h := &holder{}
		r, err := p.Acquire(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.ID)
		p.Release(r, h)
	}
	if want := []string{"voc/0", "voc/1", "voc/2", "voc/0", "voc/1", "voc/2"}; !slices.Equal(got, want) {
		t.Errorf("one request at a time went to %v, want %v", got, want)
	}
}

func TestQueueFIFOAndCancel(t *testing.T) {
	p := newPool(1, 1, 2)
	ctx := context.Background()
	first := &holder{}
	r, err := p.Acquire(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, err := p.Acquire(cctx, &holder{})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled waiter: %v", err)
		}
		got <- "cancelled"
	}()
	waitQueued(t, p, 1)
	h2 := &holder{}
	go func() {
		defer wg.Done()
		r2, err := p.Acquire(ctx, h2)
		if err != nil {
			t.Error(err)
			return
		}
		got <- "granted"
		p.Release(r2, h2)
	}()
	waitQueued(t, p, 2)
	if _, err := p.Acquire(ctx, &holder{}); !errors.Is(err, ErrQueueFull) {
		t.Errorf("third waiter: %v", err)
	}
	cancel()
	if g := <-got; g != "cancelled" {
		t.Fatalf("got %s", g)
	}
	p.Release(r, first)
	if g := <-got; g != "granted" {
		t.Fatalf("got %s", g)
	}
	wg.Wait()
	if st := p.Stats(); st.Bindings != 0 || st.Queued != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func waitQueued(t *testing.T, p *Pool, n int) {
	t.Helper()
	for p.Stats().Queued != n {
		// The waiter registers itself under the pool's lock before blocking.
		runtime.Gosched()
	}
}

func TestMarkLost(t *testing.T) {
	p := newPool(2, 1, 4)
	ctx := context.Background()
	h := &holder{}
	r, err := p.Acquire(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if !p.MarkLost(r, errors.New("exit 1")) || p.MarkLost(r, errors.New("again")) {
		t.Error("MarkLost should report true once")
	}
	if len(h.lost) != 1 || h.lost[0] != r.ID {
		t.Errorf("holder told %v", h.lost)
	}
	h2 := &holder{}
	r2, err := p.Acquire(ctx, h2)
	if err != nil || r2 == r {
		t.Fatalf("acquire after loss = %v, %v", r2, err)
	}
	// The last replica is busy: a waiter queues, then fails when it is lost too.
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx, &holder{})
		errc <- err
	}()
	waitQueued(t, p, 1)
	p.MarkLost(r2, errors.New("gone"))
	if err := <-errc; !errors.Is(err, ErrNoReplica) {
		t.Errorf("waiter err = %v", err)
	}
	if _, err := p.Acquire(ctx, &holder{}); !errors.Is(err, ErrNoReplica) {
		t.Errorf("acquire with none healthy = %v", err)
	}
	p.Release(r, h)
	p.Release(r2, h2)
	if st := p.Stats(); st.Bindings != 0 || st.Healthy != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestClose(t *testing.T) {
	p := newPool(2, 1, 1)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Replicas() {
		if r.Engine.(*nopEngine).closed != 1 {
			t.Errorf("%s not closed", r.ID)
		}
	}
	if _, err := p.Acquire(context.Background(), &holder{}); !errors.Is(err, ErrClosed) {
		t.Errorf("acquire after close = %v", err)
	}
}

func TestReplace(t *testing.T) {
	p := newPool(2, 1, 4)
	var closedByRelease []string
	p.RetiredClosed = func(r *Replica, err error) {
		if err != nil {
			t.Errorf("close %s: %v", r.ID, err)
		}
		closedByRelease = append(closedByRelease, r.ID)
	}
	ctx := context.Background()
	h := &holder{}
	old, err := p.Acquire(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	fresh := &nopEngine{}
	if _, err := p.Replace(old, fresh); err == nil {
		t.Error("replaced a healthy replica")
	}
	p.MarkLost(old, errors.New("exit 3"))
	r, err := p.Replace(old, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if r == old || r.ID != old.ID || r.Index != old.Index || r.Engine != fresh || !r.Healthy() || old.Healthy() {
		t.Fatalf("new replica %+v in the slot of %+v", r, old)
	}
	if p.InSlot(old.Index) != r || p.Replicas()[old.Index] != r {
		t.Error("the slot does not hold the new replica")
	}
	if _, err := p.Replace(old, &nopEngine{}); err == nil {
		t.Error("replaced a retired replica a second time")
	}
	// The holder still bound to the retired replica holds its binding, and
	// the retired engine stays open while it does.
	if st := p.Stats(); st.Bindings != 1 || st.Healthy != 2 || st.Replicas != 2 {
		t.Errorf("stats = %+v", st)
	}
	oldEngine := old.Engine.(*nopEngine)
	if oldEngine.closed != 0 {
		t.Fatal("retired engine closed while a binding holds it")
	}
	// New requests may use the new replica: both slots take one each.
	h1, h2 := &holder{}, &holder{}
	r1, err1 := p.Acquire(ctx, h1)
	r2, err2 := p.Acquire(ctx, h2)
	if err1 != nil || err2 != nil || r1 == old || r2 == old || r1 == r2 {
		t.Fatalf("acquire after replace = %v %v, %v %v", r1, err1, r2, err2)
	}
	p.Release(old, h)
	p.Release(old, h) // a second release is a no-op
	if oldEngine.closed != 1 || len(closedByRelease) != 1 || closedByRelease[0] != old.ID {
		t.Errorf("retired engine closed %d times (callbacks %v), want once", oldEngine.closed, closedByRelease)
	}
	p.Release(r1, h1)
	p.Release(r2, h2)
	if st := p.Stats(); st.Bindings != 0 {
		t.Errorf("stats = %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if oldEngine.closed != 1 || fresh.closed != 1 {
		t.Errorf("after Close: retired engine closed %d times, new one %d; want once each", oldEngine.closed, fresh.closed)
	}
	lost := p.InSlot(1)
	p.MarkLost(lost, errors.New("gone"))
	if _, err := p.Replace(lost, &nopEngine{}); !errors.Is(err, ErrClosed) {
		t.Errorf("replace in a closed pool = %v", err)
	}
}

func TestReplaceUnboundClosesAtOnce(t *testing.T) {
	p := newPool(1, 1, 0)
	var closed []*Replica
	p.RetiredClosed = func(r *Replica, err error) { closed = append(closed, r) }
	old := p.InSlot(0)
	p.MarkLost(old, errors.New("gone"))
	if _, err := p.Acquire(context.Background(), &holder{}); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("acquire with the only replica lost = %v", err)
	}
	r, err := p.Replace(old, &nopEngine{})
	if err != nil {
		t.Fatal(err)
	}
	if old.Engine.(*nopEngine).closed != 1 || len(closed) != 1 || closed[0] != old {
		t.Errorf("unbound retired engine closed %d times, callbacks %d; want once", old.Engine.(*nopEngine).closed, len(closed))
	}
	h := &holder{}
	if got, err := p.Acquire(context.Background(), h); err != nil || got != r {
		t.Fatalf("acquire after replace = %v, %v; want the new replica", got, err)
	}
	p.Release(r, h)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if old.Engine.(*nopEngine).closed != 1 || r.Engine.(*nopEngine).closed != 1 {
		t.Error("Close closed an engine twice or not at all")
	}
}

func TestReplaceGrantsWaiters(t *testing.T) {
	p := newPool(2, 1, 2)
	ctx := context.Background()
	h0, h1 := &holder{}, &holder{}
	r0, _ := p.Acquire(ctx, h0)
	r1, _ := p.Acquire(ctx, h1)
	type result struct {
		r   *Replica
		err error
	}
	got := make(chan result, 1)
	hw := &holder{}
	go func() {
		r, err := p.Acquire(ctx, hw)
		got <- result{r, err}
	}()
	waitQueued(t, p, 1)
	// Another replica is still healthy: the waiter keeps waiting.
	p.MarkLost(r0, errors.New("gone"))
	if st := p.Stats(); st.Queued != 1 {
		t.Fatalf("stats after loss = %+v", st)
	}
	fresh, err := p.Replace(r0, &nopEngine{})
	if err != nil {
		t.Fatal(err)
	}
	g := <-got
	if g.err != nil || g.r != fresh {
		t.Fatalf("waiter got %v, %v; want the new replica", g.r, g.err)
	}
	if st := p.Stats(); st.Queued != 0 || st.Bindings != 3 {
		t.Errorf("stats = %+v", st)
	}
	p.Release(fresh, hw)
	p.Release(r1, h1)
	p.Release(r0, h0)
	if st := p.Stats(); st.Bindings != 0 {
		t.Errorf("stats = %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseWithRetired(t *testing.T) {
	p := newPool(1, 1, 0)
	h := &holder{}
	old, err := p.Acquire(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	p.MarkLost(old, errors.New("gone"))
	r, err := p.Replace(old, &nopEngine{})
	if err != nil {
		t.Fatal(err)
	}
	// The binding is never released before Close (a drain that did not
	// finish): Close closes the retired engine, and a late release does
	// not close it again.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p.Release(old, h)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n, m := old.Engine.(*nopEngine).closed, r.Engine.(*nopEngine).closed; n != 1 || m != 1 {
		t.Errorf("retired engine closed %d times, new one %d; want once each", n, m)
	}
}

func TestAcquireFastPathAllocs(t *testing.T) {
	p := newPool(2, 4, 0)
	ctx := context.Background()
	h := &holder{}
	allocs := testing.AllocsPerRun(100, func() {
		r, err := p.Acquire(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		p.Release(r, h)
	})
	if allocs != 0 {
		t.Errorf("Acquire and Release of a free replica allocate %v times", allocs)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	p := newPool(2, 4, 0)
	ctx := context.Background()
	h := &holder{}
	b.ReportAllocs()
	for b.Loop() {
		r, err := p.Acquire(ctx, h)
		if err != nil {
			b.Fatal(err)
		}
		p.Release(r, h)
	}
}

// TestRestartWait: with every replica lost and still in its slot (being
// restarted), a request waits up to RestartWait for the new one and is
// bound to it, or fails with ErrNoReplica when none comes in time; without
// RestartWait, or with no slot left, it fails at once.
func TestRestartWait(t *testing.T) {
	p := newPool(1, 1, 4)
	ctx := context.Background()
	old := p.Replicas()[0]
	p.MarkLost(old, errors.New("exit 1"))
	if _, err := p.Acquire(ctx, &holder{}); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("without RestartWait: %v, want ErrNoReplica at once", err)
	}

	p.RestartWait = time.Minute
	got := make(chan *Replica, 1)
	go func() {
		r, err := p.Acquire(ctx, &holder{})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitQueued(t, p, 1)
	r, err := p.Replace(old, &nopEngine{})
	if err != nil {
		t.Fatal(err)
	}
	if b := <-got; b != r {
		t.Errorf("the waiter got %v, want the restarted replica", b)
	}

	p.MarkLost(r, errors.New("exit 2"))
	p.RestartWait = 10 * time.Millisecond
	if _, err := p.Acquire(ctx, &holder{}); !errors.Is(err, ErrNoReplica) {
		t.Errorf("no restart within RestartWait: %v, want ErrNoReplica", err)
	}
	if st := p.Stats(); st.Queued != 0 {
		t.Errorf("%d still queued", st.Queued)
	}
}

// TestAcquireHealthy: AcquireHealthy binds to a healthy replica, waits in
// the queue for a busy one, and fails at once with ErrNoReplica when
// every replica is lost, however long RestartWait is.
func TestAcquireHealthy(t *testing.T) {
	p := newPool(2, 1, 4)
	p.RestartWait = time.Minute
	ctx := context.Background()
	rs := p.Replicas()
	p.MarkLost(rs[0], errors.New("killed"))
	first := &holder{}
	r, err := p.AcquireHealthy(ctx, first)
	if err != nil || r != rs[1] {
		t.Fatalf("AcquireHealthy = %v, %v; want the healthy replica", r, err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := p.AcquireHealthy(ctx, &holder{})
		if err == nil && r != rs[1] {
			err = fmt.Errorf("bound to %s", r.ID)
		}
		got <- err
	}()
	waitQueued(t, p, 1)
	p.Release(rs[1], first)
	if err := <-got; err != nil {
		t.Fatalf("the waiter for a busy replica: %v", err)
	}

	p.MarkLost(rs[1], errors.New("killed"))
	start := time.Now()
	if _, err := p.AcquireHealthy(ctx, &holder{}); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("every replica lost: %v, want ErrNoReplica", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("AcquireHealthy waited %s for a restart", d)
	}
	if st := p.Stats(); st.Queued != 0 {
		t.Errorf("%d still queued", st.Queued)
	}
}
