// Package orchtest helps tests outside the orchestrator run one: start it
// for the length of a test, and gather a speech request's audio and words.
package orchtest

import (
	"context"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// Start builds and starts an orchestrator for cfg, failing the test if it
// cannot, and shuts it down when the test ends. timeout bounds the start
// and the shutdown each.
func Start(t testing.TB, cfg *pipeline.Config, opts orchestrator.Options, timeout time.Duration) *orchestrator.Orchestrator {
	t.Helper()
	o, err := orchestrator.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return o
}

// Speech is a request's audio and word timestamps.
type Speech struct {
	Rate    int
	Samples []int16
	Words   []engine.Word
}

// CollectSpeech runs req to its end and gathers its audio and words.
func CollectSpeech(t testing.TB, o *orchestrator.Orchestrator, req orchestrator.Request) Speech {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := o.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sp Speech
	for _, out := range outs {
		a, err := engine.JoinAudio(out.Chunks)
		if err != nil {
			t.Fatal(err)
		}
		if a != nil {
			sp.Rate, sp.Samples = a.SampleRate, a.Samples
		}
		sp.Words = append(sp.Words, engine.JoinWords(out.Chunks)...)
	}
	return sp
}
