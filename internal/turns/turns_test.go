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
	done, err := s.Acquire(ctx, time.Unix(0, 0))
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
			end()
		}()
		waitFor(t, s, i+1)
	}
	done()
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
	done, _ := s.Acquire(context.Background(), time.Now())
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
	done()
	end, err := s.Acquire(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	end()
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
		end()
	}()
	waitFor(t, s, 1)
	a()
	<-got
	b()
}
