package orchestrator

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// idleLog is an IdleObserver that notes its calls.
type idleLog struct {
	mu    sync.Mutex
	calls []string
}

var _ IdleObserver = (*idleLog)(nil)

func (l *idleLog) Busy() { l.note("busy") }
func (l *idleLog) Idle() { l.note("idle") }

func (l *idleLog) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *idleLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// TestIdleObserver checks the observer hears one busy period for
// overlapping requests, and another for a request after them.
func TestIdleObserver(t *testing.T) {
	obs := &idleLog{}
	block := make(chan struct{})
	f := newFixture(t, setup{
		opts: func(o *Options) { o.Idle = obs },
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if job.RequestID != "last" {
				<-block
			}
			return nil
		}},
	})
	var streams []*Stream
	for _, id := range []string{"a", "b"} {
		s, err := f.o.Submit(context.Background(), Request{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	if got := obs.get(); !slices.Equal(got, []string{"busy"}) {
		t.Fatalf("with two requests in flight: calls %v, want [busy]", got)
	}
	close(block)
	for _, s := range streams {
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
		<-s.Done()
	}
	s, err := f.o.Submit(context.Background(), Request{ID: "last"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if got, want := obs.get(), []string{"busy", "idle", "busy", "idle"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	f.assertIdle()
}
