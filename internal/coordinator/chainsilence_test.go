package coordinator_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/coordinator"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/testkit"
)

// holding is a stage server of hoptest.TextPipeline's stage whose engine stops
// after taking `after` chunks of its input and sending `sent` chunks, as
// a server that hangs mid-call: it answers, then says nothing more.
// window is the answer timeout of these tests: short, so that a test that
// waits for a silent server to be given up waits little.
const window = 200 * time.Millisecond

func holding(t *testing.T, stage, after, sent int) *apitest.Server {
	t.Helper()
	hooks := &testengine.Hooks{
		Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if sent > 0 {
				return nil
			}
			for range after {
				if _, err := job.In.Recv(ctx); err != nil {
					return err
				}
			}
			<-ctx.Done()
			return ctx.Err()
		},
		Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
			if sent > 0 && n >= sent {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
	}
	return apitest.Start(t, testkit.Parse(t, hoptest.TextPipeline), orchestrator.Options{Registry: hoptest.Registry(hooks)}, api.Options{Stage: &stage})
}

// silentAnswer is a server that answers a call's headers, then nothing.
func silentAnswer(t *testing.T) string {
	t.Helper()
	return apitest.Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", hop.ContentType)
		w.Header().Set(hop.HeaderStage, "1")
		w.Header().Set(hop.HeaderFinished, "false")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
}

// TestChainSilence: a server that stops after its answer began no longer
// holds the chain: before the answer's first chunk the call moves to the
// stage's next server (its input sent again, however much of it the
// stopped server took), and after it the request fails at once with the
// stage, the URL and the silence, every server left idle.
func TestChainSilence(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	urls := hoptest.StartStages(t, cfg, "", nil)
	calls := func(hops *[]coordinator.CallReport, mu *sync.Mutex) func(coordinator.CallReport) {
		return func(h coordinator.CallReport) { mu.Lock(); *hops = append(*hops, h); mu.Unlock() }
	}

	for _, tc := range []struct {
		name   string
		stage  int
		silent string // the stage's first server
	}{
		{"headers only", 0, silentAnswer(t)},
		{"stream header only", 0, holding(t, 0, 0, 0).URL},
		{"input taken", 1, holding(t, 1, 1, 0).URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stages := map[int][]string{0: urls[0], 1: urls[1], 2: urls[2]}
			stages[tc.stage] = []string{tc.silent, urls[tc.stage][0]}
			var mu sync.Mutex
			var hops []coordinator.CallReport
			chain := &coordinator.Chain{Stages: stages, AnswerTimeout: window, OnCall: calls(&hops, &mu)}
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
			defer cancel()
			got, _, err := hoptest.Run(ctx, chain, hoptest.Prompt("retry"))
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != "text=retry|a.0|b.0|c.0 / retry|a.1|b.0|c.0" {
				t.Errorf("output %s", got)
			}
			var moved bool
			for _, h := range hops {
				if h.Stage == tc.stage && h.URL == tc.silent {
					moved = h.Retrying && h.RetryURL == urls[tc.stage][0] && strings.Contains(errString(h.Err), "a hung or stopped server?")
				}
			}
			if !moved {
				t.Errorf("no call moved off the silent server: %+v", hops)
			}
		})
	}

	t.Run("bound after its first chunk", func(t *testing.T) {
		silent := holding(t, 1, 0, 1)
		stages := map[int][]string{0: urls[0], 1: {silent.URL, urls[1][0]}, 2: urls[2]}
		var mu sync.Mutex
		var hops []coordinator.CallReport
		chain := &coordinator.Chain{Stages: stages, AnswerTimeout: window, OnCall: calls(&hops, &mu)}
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		defer cancel()
		_, _, err := hoptest.Run(ctx, chain, hoptest.Prompt("split here"))
		var ce *coordinator.CallError
		var te *hop.TransportError
		if !errors.As(err, &ce) || ce.Stage != 1 || ce.URL != silent.URL || !errors.As(err, &te) || !strings.Contains(te.Error(), "no byte of the answer") {
			t.Fatalf("err = %v, want stage 1's silence at %s", err, silent.URL)
		}
		for _, h := range hops {
			if h.Retrying {
				t.Errorf("a call moved after its answer passed a chunk on: %+v", h)
			}
		}
		hoptest.Idle(t, silent.Orch)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
