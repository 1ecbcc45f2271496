package orchestrator

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// refusing is a test engine hook: the vocoder replicas in refuse fail as
// a stage server whose connection is refused does, before they take
// anything of the request.
func refusing(refuse ...string) testengine.Hooks {
	return testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		for _, id := range refuse {
			if e.ReplicaID() == id {
				return fmt.Errorf("dial %s: connection refused: %w (%w)", id, engine.ErrReplicaLost, engine.ErrUnsent)
			}
		}
		return nil
	}}
}

// TestUnsentMovesToAnotherReplica: a stage whose replica is lost before it
// took anything of the request runs on another healthy replica; the lost
// ones are out of service at once, and the moves are counted.
func TestUnsentMovesToAnotherReplica(t *testing.T) {
	f := newFixture(t, setup{
		opts:   noRestartSoon,
		deploy: "  stages:\n    - {id: 1, replicas: 3}",
		hooks:  refusing("vocoder/0", "vocoder/1"),
	})
	s, err := f.o.Submit(context.Background(), Request{ID: "moved", Prompt: engine.Prompt{Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := collect(t, s)
	if err != nil || len(outs) != 1 {
		t.Fatalf("the request failed although vocoder/2 is healthy: %v %v", outs, err)
	}
	f.rec.mu.Lock()
	ran := f.rec.replicas["moved"][1]
	f.rec.mu.Unlock()
	if ran != "vocoder/2" {
		t.Errorf("the stage last ran on %s, want vocoder/2", ran)
	}
	if got := s.Timings()[1].Replica; got != "vocoder/2" {
		t.Errorf("the stage's timing names %s, want vocoder/2", got)
	}
	if st := f.o.Stats().Stages[1]; st.Healthy != 1 {
		t.Errorf("%d healthy vocoders, want 1: the refusing ones must be out of service at once", st.Healthy)
	}
	if got := testutil.ToFloat64(f.o.metrics.retries.WithLabelValues("1")); got != 2 {
		t.Errorf("omnistage_stage_retries_total{stage=1} = %v, want 2", got)
	}
	f.assertIdle()
}

// TestUnsentNoOtherReplica: when every replica refuses, the request fails
// by the loss of the last one it tried (a 502 replica_lost naming it).
func TestUnsentNoOtherReplica(t *testing.T) {
	f := newFixture(t, setup{
		opts:   noRestartSoon,
		deploy: "  stages:\n    - {id: 1, replicas: 2}",
		hooks:  refusing("vocoder/0", "vocoder/1"),
	})
	s, err := f.o.Submit(context.Background(), Request{ID: "lost"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Err()
	codeIs(t, err, CodeReplicaLost)
	contains(t, err, "stage 1 (vocoder): replica vocoder/1 was lost")
	contains(t, err, "dial vocoder/1: connection refused")
	f.assertIdle()
}

// TestSentIsNotMoved: a replica lost after it took the request's input
// fails the request (the bound-sender rule).
func TestSentIsNotMoved(t *testing.T) {
	f := newFixture(t, setup{
		opts:   noRestartSoon,
		deploy: "  stages:\n    - {id: 1, replicas: 2}",
		hooks: testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if e.ReplicaID() == "vocoder/0" {
				if _, err := job.In.Recv(ctx); err != nil {
					return err
				}
				return fmt.Errorf("connection reset: %w", engine.ErrReplicaLost)
			}
			return nil
		}},
	})
	s, err := f.o.Submit(context.Background(), Request{ID: "sent"})
	if err != nil {
		t.Fatal(err)
	}
	codeIs(t, s.Err(), CodeReplicaLost)
	if got := testutil.ToFloat64(f.o.metrics.retries.WithLabelValues("1")); got != 0 {
		t.Errorf("omnistage_stage_retries_total{stage=1} = %v, want 0", got)
	}
}
