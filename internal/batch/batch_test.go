package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBatcher doubles each int input; an input below zero is that item's
// error. It records every batch's inputs, and holds each batch until
// release has a value for it when gate is set.
type fakeBatcher struct {
	mu      sync.Mutex
	batches [][]int
	gate    chan struct{} // nil: no holding
	started chan struct{} // receives one value per batch begun, when set
}

func (f *fakeBatcher) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	var in []int
	for _, it := range items {
		in = append(in, it.Input.(int))
	}
	f.mu.Lock()
	f.batches = append(f.batches, in)
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	for _, it := range items {
		if v := it.Input.(int); v < 0 {
			it.Err = fmt.Errorf("input %d is negative", v)
		} else {
			it.Output = 2 * v
		}
	}
	return nil
}

func (f *fakeBatcher) seen() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func items(size int, inputs ...int) []*engine.BatchItem {
	var out []*engine.BatchItem
	for _, v := range inputs {
		out = append(out, &engine.BatchItem{Input: v, Size: size})
	}
	return out
}

// dueTurner is an engine.Turner that says when its request is due, and
// gives turns at once.
type dueTurner time.Time

func (d dueTurner) Turn(context.Context) (engine.CPUTurn, error) { return noTurn{}, nil }
func (d dueTurner) Due(context.Context) time.Time                { return time.Time(d) }

type noTurn struct{}

func (noTurn) Yield(context.Context) error { return nil }
func (noTurn) End()                        {}

func dueAt(d time.Duration) context.Context {
	return engine.WithTurner(context.Background(), dueTurner(time.Unix(0, 0).Add(d)))
}

// TestFullBatchAtOnce: Max items make a batch without waiting out Delay,
// and every item's output comes back to its call.
func TestFullBatchAtOnce(t *testing.T) {
	f := &fakeBatcher{}
	q := New(f, Options{Max: 4, Delay: time.Hour})
	its := items(0, 1, 2, 3, 4)
	done := make(chan error, 1)
	go func() { done <- q.Run(context.Background(), its) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, it := range its {
		if it.Output != 2*(i+1) || it.Err != nil {
			t.Errorf("item %d: %v, %v", i, it.Output, it.Err)
		}
	}
	if b := f.seen(); len(b) != 1 || len(b[0]) != 4 {
		t.Errorf("batches %v, want one of the 4 items", b)
	}
}

// TestLoneItemWaitsDelay: an item alone waits Delay for company, no more
// than it takes to notice, then runs alone.
func TestLoneItemWaitsDelay(t *testing.T) {
	f := &fakeBatcher{}
	var sizes []int
	var waits []time.Duration
	q := New(f, Options{Max: 8, Delay: 30 * time.Millisecond, Observe: func(n int, w time.Duration) {
		sizes, waits = append(sizes, n), append(waits, w)
	}})
	its := items(0, 21)
	if err := q.Run(context.Background(), its); err != nil {
		t.Fatal(err)
	}
	if its[0].Output != 42 || !slices.Equal(sizes, []int{1}) || waits[0] < 30*time.Millisecond {
		t.Errorf("output %v, batches %v, waits %v; want 42 from one batch of 1 after at least 30ms", its[0].Output, sizes, waits)
	}
}

// TestGathersAcrossCalls: concurrent calls' items share batches, and
// each call gets its own outputs.
func TestGathersAcrossCalls(t *testing.T) {
	f := &fakeBatcher{}
	q := New(f, Options{Max: 8, Delay: 200 * time.Millisecond})
	var wg sync.WaitGroup
	calls := make([][]*engine.BatchItem, 4)
	for i := range calls {
		calls[i] = items(0, 10*i, 10*i+1)
		wg.Go(func() {
			if err := q.Run(context.Background(), calls[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, c := range calls {
		for j, it := range c {
			if it.Output != 2*(10*i+j) {
				t.Errorf("call %d item %d: %v", i, j, it.Output)
			}
		}
	}
	if b := f.seen(); len(b) != 1 || len(b[0]) != 8 {
		t.Errorf("batches %v, want one of all 8 items", b)
	}
}

// TestUrgentFirstThenCloseSizes: while a batch runs, the next one is
// formed from the most urgent item and the items closest to its size.
func TestUrgentFirstThenCloseSizes(t *testing.T) {
	f := &fakeBatcher{gate: make(chan struct{}), started: make(chan struct{}, 8)}
	q := New(f, Options{Max: 2, Delay: time.Hour})
	var wg sync.WaitGroup
	wg.Go(func() { _ = q.Run(context.Background(), items(0, 0, 0)) }) // fills the first batch
	<-f.started
	// Waiting meanwhile: sizes 100 (due 3s), 10 (due 1s), 98 (due 2s), 12 (due 4s).
	for _, c := range []struct {
		due  time.Duration
		size int
		v    int
	}{{3 * time.Second, 100, 100}, {time.Second, 10, 10}, {2 * time.Second, 98, 98}, {4 * time.Second, 12, 12}} {
		wg.Go(func() { _ = q.Run(dueAt(c.due), items(c.size, c.v)) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		q.mu.Lock()
		n := len(q.waiting)
		q.mu.Unlock()
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items waiting, want 4", n)
		}
		time.Sleep(time.Millisecond)
	}
	for range 3 {
		f.gate <- struct{}{}
	}
	wg.Wait()
	want := [][]int{{0, 0}, {10, 12}, {98, 100}}
	if got := f.seen(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// TestCancelledLeaves: a call cancelled while its items wait leaves the
// queue and returns its ctx's error; the other calls are not failed.
func TestCancelledLeaves(t *testing.T) {
	f := &fakeBatcher{gate: make(chan struct{}), started: make(chan struct{}, 8)}
	q := New(f, Options{Max: 4, Delay: time.Hour})
	first := make(chan error, 1)
	go func() { first <- q.Run(context.Background(), items(0, 1, 2, 3, 4)) }()
	<-f.started // the first batch runs and holds
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { gone <- q.Run(ctx, items(0, 5, 6)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q.mu.Lock()
		n := len(q.waiting)
		q.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second call's items never waited")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	close(f.gate)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	for _, b := range f.seen() {
		if slices.Contains(b, 5) || slices.Contains(b, 6) {
			t.Errorf("a cancelled item ran: %v", f.seen())
		}
	}
}

// TestItemErrorIsItsOwn: an item whose input the engine refuses fails
// alone; a batch's error fails every item of it.
func TestItemErrorIsItsOwn(t *testing.T) {
	f := &fakeBatcher{}
	q := New(f, Options{Max: 4, Delay: 10 * time.Millisecond})
	good, bad := items(0, 1), items(0, -1)
	var wg sync.WaitGroup
	wg.Go(func() { _ = q.Run(context.Background(), good) })
	wg.Go(func() { _ = q.Run(context.Background(), bad) })
	wg.Wait()
	if good[0].Output != 2 || good[0].Err != nil || bad[0].Err == nil {
		t.Errorf("good %v/%v, bad %v/%v", good[0].Output, good[0].Err, bad[0].Output, bad[0].Err)
	}
	failing := New(batcherFunc(func(context.Context, []*engine.BatchItem) error { return errors.New("model crashed") }), Options{Max: 2})
	its := items(0, 1, 2)
	if err := failing.Run(context.Background(), its); err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Err == nil || it.Err.Error() != "model crashed" {
			t.Errorf("item of a failed batch: %v", it.Err)
		}
	}
}

type batcherFunc func(context.Context, []*engine.BatchItem) error

func (f batcherFunc) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	return f(ctx, items)
}

// TestRunBatchedAlone: without a runner in ctx, RunBatched computes the
// items in one call.
func TestRunBatchedAlone(t *testing.T) {
	f := &fakeBatcher{}
	its := items(0, 1, 2, 3)
	if err := engine.RunBatched(context.Background(), f, its); err != nil {
		t.Fatal(err)
	}
	if b := f.seen(); len(b) != 1 || its[2].Output != 6 {
		t.Errorf("batches %v, outputs %v", b, its[2].Output)
	}
	q := New(f, Options{Max: 2})
	its = items(0, 4, 5)
	if err := engine.RunBatched(engine.WithBatches(context.Background(), q), f, its); err != nil || its[1].Output != 10 {
		t.Errorf("through a queue: %v, %v", err, its[1].Output)
	}
}

// TestWorkers: up to Workers batches run at once, each of what queued
// when it began (no Delay: a lone item never waits).
func TestWorkers(t *testing.T) {
	f := &fakeBatcher{gate: make(chan struct{}), started: make(chan struct{}, 8)}
	q := New(f, Options{Max: 4, Workers: 2})
	var wg sync.WaitGroup
	wg.Go(func() { _ = q.Run(context.Background(), items(0, 1)) })
	<-f.started // the first runs alone, at once
	wg.Go(func() { _ = q.Run(context.Background(), items(0, 2)) })
	<-f.started // and a second beside it, while the first holds
	wg.Go(func() { _ = q.Run(context.Background(), items(0, 3, 4)) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		q.mu.Lock()
		n := len(q.waiting)
		q.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third call's items never waited")
		}
		time.Sleep(time.Millisecond)
	}
	close(f.gate)
	wg.Wait()
	want := [][]int{{1}, {2}, {3, 4}}
	if got := f.seen(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}
