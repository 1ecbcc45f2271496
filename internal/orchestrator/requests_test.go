package orchestrator

import (
	"context"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// TestSharedRequests checks two orchestrators that share one registry of
// request ids, as the pipelines of one server do: an id in flight in one
// is refused in the other, an abort and a lookup through either find it,
// and once it has ended the id is free in both.
func TestSharedRequests(t *testing.T) {
	reqs := NewRequests()
	release := make(chan struct{})
	hold := testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}
	a := newFixture(t, setup{hooks: hold, opts: func(o *Options) { o.Requests = reqs }})
	b := newFixture(t, setup{opts: func(o *Options) { o.Requests = reqs }})
	s, err := a.o.Submit(context.Background(), Request{ID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.o.Submit(context.Background(), Request{ID: "shared"})
	codeIs(t, err, CodeConflict)
	if st, ok := b.o.Lookup("shared"); !ok || st != StateActive {
		t.Errorf("lookup through the other orchestrator: %v, %v", st, ok)
	}
	if err := b.o.Abort(context.Background(), "shared"); err != nil {
		t.Fatalf("abort through the other orchestrator: %v", err)
	}
	if _, err := collect(t, s); CodeOf(err) != CodeAborted {
		t.Errorf("aborted request ended with %v", err)
	}
	close(release)
	s, err = b.o.Submit(context.Background(), Request{ID: "shared"})
	if err != nil {
		t.Fatalf("the id once free: %v", err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	// Ids the orchestrators make never collide.
	s1, err := a.o.Submit(context.Background(), Request{})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.o.Submit(context.Background(), Request{})
	if err != nil {
		t.Fatal(err)
	}
	if s1.ID() == s2.ID() {
		t.Errorf("both orchestrators made the id %s", s1.ID())
	}
	for _, s := range []*Stream{s1, s2} {
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.o.Stats().InFlight + b.o.Stats().InFlight; n != 0 {
		t.Errorf("%d requests in flight after both ended", n)
	}
}
