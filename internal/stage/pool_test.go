package stage

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

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
	return NewPool(1, "voc", es, inflight, queue)
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
