package membudget

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"
)

// TestTake: parts are taken while they fit; one more waits the longest
// wait and is refused as busy, or ends with its context; a part given back
// makes room; a part larger than the budget takes all of it.
func TestTake(t *testing.T) {
	b := New(3<<20, 20*time.Millisecond, nil)
	ctx := context.Background()
	first, err := b.Take(ctx, 2<<20, "bodies")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Take(ctx, 1<<20, "bodies")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Take(ctx, 1, "/v1/run frames")
	var busy *BusyError
	if !errors.As(err, &busy) || err.Error() != "server busy: the /v1/run frames in progress hold all of its 3 MiB for them; retry later" {
		t.Fatalf("a part past the budget: %v, want a *BusyError", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Take(cancelled, 1, "bodies"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose context ended: %v, want context.Canceled", err)
	}
	first()
	third, err := b.Take(ctx, 2<<20, "bodies")
	if err != nil {
		t.Fatalf("after a part was given back: %v", err)
	}
	second()
	third()
	all, err := b.Take(ctx, 1<<30, "bodies")
	if err != nil {
		t.Fatalf("a part larger than the budget: %v", err)
	}
	if _, err := b.Take(ctx, 1, "bodies"); !errors.As(err, &busy) {
		t.Fatalf("with the whole budget taken: %v, want a *BusyError", err)
	}
	all()
}

// observer records the Busy and Idle calls of a budget.
type observer struct{ calls []string }

func (o *observer) Busy() { o.calls = append(o.calls, "busy") }
func (o *observer) Idle() { o.calls = append(o.calls, "idle") }

// TestHold: a hold grows by what its call learns it needs, within the
// budget: a growth that does not fit waits and is refused as busy, the
// hold keeping what it had; Release gives back all of it at once. The
// observer hears busy when the first part is taken and idle when the last
// is given back, once each however many holds overlap.
func TestHold(t *testing.T) {
	var obs observer
	b := New(4<<20, 20*time.Millisecond, &obs)
	ctx := context.Background()
	h := b.Hold("/v1/run bodies")
	if err := h.Grow(ctx, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := h.Grow(ctx, 3<<20); err != nil {
		t.Fatal(err)
	}
	other, err := b.Take(ctx, 1<<20-64<<10, "/v1/run frames")
	if err != nil {
		t.Fatal(err)
	}
	var busy *BusyError
	if err := h.Grow(ctx, 1); !errors.As(err, &busy) || h.Size() != 3<<20+64<<10 {
		t.Fatalf("a growth past the budget: %v, holding %d; want a *BusyError and the part held before", err, h.Size())
	}
	if b.Held() != 4<<20 {
		t.Fatalf("the budget says %d bytes are held, want all of its 4 MiB", b.Held())
	}
	h.Release()
	if h.Size() != 0 || b.Held() != 1<<20-64<<10 {
		t.Fatalf("a released hold holds %d bytes, the budget %d", h.Size(), b.Held())
	}
	all := b.Hold("bodies")
	if err := all.Grow(ctx, 3<<20+64<<10); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	other()
	if err := all.Grow(ctx, 1<<30); err != nil || all.Size() != 4<<20 {
		t.Fatalf("a growth past the whole budget: %v, holding %d; want the whole budget", err, all.Size())
	}
	all.Release()
	all.Release()
	if got := strings.Join(obs.calls, " "); got != "busy idle" {
		t.Fatalf("the observer heard %q, want busy then idle once", got)
	}
}

// TestGrowGoesFirst: a hold that grows goes before the calls waiting for
// their first part, whose wait may be for its memory: a call that has
// begun to read a body is not held up by the bodies waiting to begin, and
// those begin once it is done.
func TestGrowGoesFirst(t *testing.T) {
	b := New(10<<20, time.Minute, nil)
	ctx := context.Background()
	reading := b.Hold("bodies")
	if err := reading.Grow(ctx, 6<<20); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	next := b.Hold("bodies")
	go func() { waiting <- next.Grow(ctx, 8<<20) }()
	testkit.Eventually(t, "the first part waiting", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiters) == 1
	})
	if err := reading.Grow(ctx, 1<<20); err != nil { // waits for no one
		t.Fatalf("a growing hold behind a first part: %v", err)
	}
	reading.Release()
	if err := <-waiting; err != nil || next.Size() != 8<<20 {
		t.Fatalf("the first part waiting: %v, holding %d", err, next.Size())
	}
	next.Release()
}
