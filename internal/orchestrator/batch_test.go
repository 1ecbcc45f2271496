package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/testkit"
)

// batchPipeline is one batching stage; its batches fill at 4 units, or
// once the oldest has waited 300ms (long, so that concurrent requests
// meet in a batch however loaded the machine).
const batchPipeline = `
pipeline:
  name: batch
  input: text
  stages:
    - {id: 0, name: upper, engine: test-batcher, input: text, output: text, final_output: true}
deploy:
  abort_timeout: 5s
  stages:
    - {id: 0, max_inflight: 16, max_batch: %d, max_batch_delay: 300ms}
`

func startBatching(t *testing.T, maxBatch int) (*orchestrator.Orchestrator, *testengine.Batcher, *prometheus.Registry) {
	t.Helper()
	var mu sync.Mutex
	var made *testengine.Batcher
	reg := &engine.Registry{}
	testengine.RegisterBatcher(reg, func(b *testengine.Batcher) {
		mu.Lock()
		made = b
		mu.Unlock()
	}, "test-batcher")
	metrics := prometheus.NewRegistry()
	o := orchtest.Start(t, testkit.Parse(t, fmt.Sprintf(batchPipeline, maxBatch)), orchestrator.Options{Registry: reg, Registerer: metrics}, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	return o, made, metrics
}

func run(ctx context.Context, o *orchestrator.Orchestrator, text string) (string, error) {
	s, err := o.Submit(ctx, orchestrator.Request{Prompt: engine.Prompt{Text: text}})
	if err != nil {
		return "", err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return "", err
	}
	got := ""
	for _, c := range outs[0].Chunks {
		got += c.Text.Text
	}
	return got, nil
}

// TestBatchesAcrossRequests: the units of concurrent requests run in
// shared batches, each request gets its own results, a request whose
// unit is bad fails alone, and the batches are observed.
func TestBatchesAcrossRequests(t *testing.T) {
	o, b, metrics := startBatching(t, 4)
	var wg sync.WaitGroup
	texts := []string{"one two", "three four", "five bad", "six seven"}
	results := make([]string, len(texts))
	errs := make([]error, len(texts))
	for i, text := range texts {
		wg.Go(func() { results[i], errs[i] = run(context.Background(), o, text) })
	}
	wg.Wait()
	want := []string{"ONE TWO", "THREE FOUR", "", "SIX SEVEN"}
	for i := range texts {
		if i == 2 {
			var ie *engine.InputError
			if !errors.As(errs[i], &ie) || orchestrator.CodeOf(errs[i]) != orchestrator.CodeBadRequest {
				t.Errorf("request with a bad unit: %v, want its bad input", errs[i])
			}
			continue
		}
		if errs[i] != nil || results[i] != want[i] {
			t.Errorf("request %d: %q, %v; want %q", i, results[i], errs[i], want[i])
		}
	}
	sizes := b.Sizes()
	total, most := 0, 0
	for _, n := range sizes {
		total, most = total+n, max(most, n)
	}
	if total != 8 || most < 2 || most > 4 {
		t.Errorf("batches %v: want the 8 units in batches of at most 4, some shared", sizes)
	}
	if n := testutil.CollectAndCount(metrics, "omnistage_batch_size"); n != 1 {
		t.Errorf("omnistage_batch_size has %d series, want the stage's", n)
	}
	testkit.Eventually(t, "no request held", func() bool { return o.Stats().InFlight == 0 })
}

// TestBatchOff: max_batch 1 runs each request's units in calls of its
// own, never with another request's.
func TestBatchOff(t *testing.T) {
	o, b, _ := startBatching(t, 1)
	var wg sync.WaitGroup
	for _, text := range []string{"a b c", "d e"} {
		wg.Go(func() {
			if _, err := run(context.Background(), o, text); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sizes := b.Sizes()
	if len(sizes) != 2 || sizes[0]+sizes[1] != 5 || (sizes[0] != 2 && sizes[0] != 3) {
		t.Errorf("batches %v, want one per request (3 and 2 units)", sizes)
	}
}

// TestBatchCancelled: a request cancelled while its units wait for a
// batch ends at once, and the queue serves the next one.
func TestBatchCancelled(t *testing.T) {
	o, _, _ := startBatching(t, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := run(ctx, o, "waits for company")
		done <- err
	}()
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled request succeeded")
	}
	if got, err := run(context.Background(), o, "next"); err != nil || got != "NEXT" {
		t.Errorf("next request: %q, %v", got, err)
	}
}
