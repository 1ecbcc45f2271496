package membudget

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTake: parts are taken while they fit; one more waits the longest
// wait and is refused as busy, or ends with its context; a part given back
// makes room; a part larger than the budget takes all of it.
func TestTake(t *testing.T) {
	b := New(3<<20, 20*time.Millisecond)
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
