package orchestrator

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// noopPipeline is three stages of no-op engines: the talker splits its text
// into one chunk per word, the others pass chunks through unchanged.
const noopPipeline = `
pipeline:
  name: bench
  input: text
  stages:
    - {id: 0, name: a, engine: test-noop, input: text,  output: audio}
    - {id: 1, name: b, engine: test-noop, input: audio, output: audio}
    - {id: 2, name: c, engine: test-noop, input: audio, output: audio, final_output: true}
deploy:
  max_inflight: 1024
  stages:
    - {id: 0, max_inflight: 1024, options: {split: true}}
    - {id: 1, max_inflight: 1024, options: {passthrough: true}}
    - {id: 2, max_inflight: 1024, options: {passthrough: true}}
`

func benchOrchestrator(b *testing.B) *Orchestrator {
	return benchOrchestratorWith(b, nil, noopPipeline)
}

// benchOrchestratorWith is benchOrchestrator of the pipeline yaml, tracing
// with tp (nil: off).
func benchOrchestratorWith(b *testing.B, tp trace.TracerProvider, yaml string) *Orchestrator {
	cfg, err := pipeline.Parse([]byte(yaml), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	reg := engine.Registry{}
	testengine.Register(&reg, nil, "test-noop")
	o, err := New(cfg, Options{Registry: &reg, TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	if err := o.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { o.Shutdown(context.Background()) })
	return o
}

// runDirect is the baseline: the same three engine replicas called one after
// the other in one goroutine, with slices between them.
func runDirect(ctx context.Context, o *Orchestrator, text string) (int, error) {
	in := []engine.Chunk{{Text: &engine.Text{Text: text}}}
	for _, st := range o.stages {
		sink := &engine.SliceSink{Chunks: make([]engine.Chunk, 0, len(in))}
		job := &engine.Job{In: engine.NewSliceSource(in...), Out: sink}
		if err := st.pool.InSlot(0).Engine.Process(ctx, job); err != nil {
			return 0, err
		}
		in = sink.Chunks
	}
	return len(in), nil
}

func runOrchestrated(ctx context.Context, o *Orchestrator, text string) (int, error) {
	s, err := o.Submit(ctx, Request{Prompt: engine.Prompt{Text: text}})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		_, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// BenchmarkRoute measures the orchestration overhead of a 3-stage route of
// no-op engines against calling the same engines directly, per request (one
// chunk) and per chunk (a request of 256 chunks); as traced, the
// cost of tracing every request (4 spans, each sampled and batched to an
// exporter that drops them); and as migratable, the cost of keeping every
// stage ready to move to another replica (engines that can be lost and
// replay deterministically: the input kept, the output hashed).
func BenchmarkRoute(b *testing.B) {
	o := benchOrchestrator(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	traced := benchOrchestratorWith(b, tp, noopPipeline)
	migratable := benchOrchestratorWith(b, nil, strings.ReplaceAll(noopPipeline, "options: {", "options: {replay: deterministic, "))
	ctx := context.Background()
	for _, size := range []struct {
		name  string
		words int
	}{{"request", 1}, {"chunks256", 256}} {
		text := strings.TrimSpace(strings.Repeat("w ", size.words))
		for _, mode := range []struct {
			name string
			run  func(context.Context, *Orchestrator, string) (int, error)
		}{{"direct", runDirect}, {"orchestrated", runOrchestrated}, {"traced", func(ctx context.Context, _ *Orchestrator, text string) (int, error) {
			return runOrchestrated(ctx, traced, text)
		}}, {"migratable", func(ctx context.Context, _ *Orchestrator, text string) (int, error) {
			return runOrchestrated(ctx, migratable, text)
		}}} {
			b.Run(size.name+"/"+mode.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					n, err := mode.run(ctx, o, text)
					if err != nil || n != size.words {
						b.Fatalf("got %d chunks, %v", n, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size.words), "ns/chunk")
			})
		}
	}
}

// BenchmarkRouteParallel measures throughput with many requests at once.
func BenchmarkRouteParallel(b *testing.B) {
	o := benchOrchestrator(b)
	text := strings.TrimSpace(strings.Repeat("w ", 16))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := runOrchestrated(ctx, o, text); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
