package turns

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor polls until n units wait for a turn.
func waitFor(t *testing.T, s *Scheduler, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", s.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEarliestDeadlineFirst: with every turn taken, the units waiting get
// theirs by deadline, ties in arrival order, whatever their arrival.
func TestEarliestDeadlineFirst(t *testing.T) {
	s := New(1)
	ctx := context.Background()
	first, err := s.Acquire(ctx, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	deadlines := []time.Duration{3, 1, 2, 1, 0} // seconds after base, in arrival order
	order := make(chan int, len(deadlines))
	for i, d := range deadlines {
		go func() {
			end, err := s.Acquire(ctx, base.Add(d*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			end.End()
		}()
		waitFor(t, s, i+1)
	}
	first.End()
	var got []int
	for range deadlines {
		got = append(got, <-order)
	}
	want := []int{4, 1, 3, 2, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("turns in order %v, want %v", got, want)
		}
	}
}

// TestCancelledWaiter: a unit whose ctx ends while it waits leaves the
// queue, and the turns go on to the others.
func TestCancelledWaiter(t *testing.T) {
	s := New(1)
	held, _ := s.Acquire(context.Background(), time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, time.Now())
		errc <- err
	}()
	waitFor(t, s, 1)
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if s.Waiting() != 0 {
		t.Fatal("the cancelled waiter is still queued")
	}
	held.End()
	end, err := s.Acquire(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	end.End()
}

// TestTurnsAtOnce: n turns run at once, no more.
func TestTurnsAtOnce(t *testing.T) {
	s := New(2)
	a, _ := s.Acquire(context.Background(), time.Now())
	b, _ := s.Acquire(context.Background(), time.Now())
	got := make(chan struct{})
	go func() {
		end, _ := s.Acquire(context.Background(), time.Now())
		close(got)
		end.End()
	}()
	waitFor(t, s, 1)
	a.End()
	<-got
	b.End()
}

// TestYield: a held turn goes to a waiter due before the holder and comes
// back by deadline; with only later waiters, Yield keeps it.
func TestYield(t *testing.T) {
	s := New(1)
	ctx := context.Background()
	base := time.Now()
	turn, err := s.Acquire(ctx, base.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	took := make(chan string, 2)
	wait := func(name string, d time.Duration) {
		go func() {
			end, err := s.Acquire(ctx, base.Add(d))
			if err != nil {
				t.Error(err)
				return
			}
			took <- name
			end.End()
		}()
	}
	wait("later", 3*time.Second)
	waitFor(t, s, 1)
	if err := turn.Yield(ctx, base.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s.Waiting() != 1 || len(took) != 0 {
		t.Fatal("Yield gave the turn to a unit due later")
	}
	wait("earlier", time.Second)
	waitFor(t, s, 2)
	// The earlier unit runs, then the yielding one (due at 2 s) gets the
	// turn back before the later one.
	if err := turn.Yield(ctx, base.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := <-took; got != "earlier" {
		t.Fatalf("%s took the yielded turn, want earlier", got)
	}
	if len(took) != 0 {
		t.Fatal("the later unit ran before the yielding one had the turn back")
	}
	turn.End()
	if got := <-took; got != "later" {
		t.Fatalf("%s ran last, want later", got)
	}
	turn.End() // a second End does nothing
	if n := freeTurns(s); n != 1 {
		t.Fatalf("%d free turns, want 1", n)
	}
}

// TestYieldCancelled: a Yield whose ctx ends while it waits loses the
// turn, and its End does nothing.
func TestYieldCancelled(t *testing.T) {
	s := New(1)
	base := time.Now()
	turn, _ := s.Acquire(context.Background(), base.Add(time.Second))
	other := make(chan *Turn)
	go func() {
		o, _ := s.Acquire(context.Background(), base)
		other <- o
	}()
	waitFor(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- turn.Yield(ctx, base.Add(time.Second)) }()
	o := <-other // the earlier unit holds the turn; the yielder waits
	waitFor(t, s, 1)
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("cancelled Yield: %v", err)
	}
	turn.End()
	if s.Waiting() != 0 {
		t.Fatal("the cancelled yielder is still queued")
	}
	o.End()
	if n := freeTurns(s); n != 1 {
		t.Fatalf("%d free turns, want 1", n)
	}
}

// freeTurns returns the turns no unit holds.
func freeTurns(s *Scheduler) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}
