package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/coordinator"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/testkit"
)

// spans indexes recorded spans by id.
type spans map[trace.SpanID]sdktrace.ReadOnlySpan

func recorded(rec *tracetest.SpanRecorder) spans {
	m := spans{}
	for _, s := range rec.Ended() {
		m[s.SpanContext().SpanID()] = s
	}
	return m
}

// stageOf returns a span's omnistage.stage attribute, or -1.
func stageOf(s sdktrace.ReadOnlySpan) int {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key("omnistage.stage") {
			return int(kv.Value.AsInt64())
		}
	}
	return -1
}

// find returns the one span with the name and stage, failing the test
// if there is not exactly one.
func (m spans) find(t *testing.T, name string, stage int) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range m {
		if s.Name() == name && stageOf(s) == stage {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q of stage %d, want 1 (of %d)", len(found), name, stage, len(m))
	}
	return found[0]
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("%s (stage %d) is not a child of %s (stage %d)", child.Name(), stageOf(child), parent.Name(), stageOf(parent))
	}
}

// TestTraceHops runs streamed hops with tracing on both sides, under the
// race detector: a chain over three stage servers, and an orchestrator
// whose stages 1 and 2 are remote. Each is one trace whose spans nest as
// the calls do.
func TestTraceHops(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	const key = "trace-test-key-0123456789"
	urls := map[int][]string{}
	for _, id := range cfg.Route.Chain() {
		stage := id
		urls[id] = []string{apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil), TracerProvider: tp},
			api.Options{Stage: &stage, Codec: payload.NewCodec([]byte(key)), TracerProvider: tp}).URL}
	}

	t.Run("chain", func(t *testing.T) {
		rec.Reset()
		ctx, root := tp.Tracer("test").Start(context.Background(), "root")
		chain := &coordinator.Chain{Client: &hop.Client{TracerProvider: tp}, Stages: urls}
		if _, _, err := hoptest.Run(ctx, chain, hoptest.Prompt("traced chain")); err != nil {
			t.Fatal(err)
		}
		root.End()
		m := recorded(rec)
		rootSpan := m[root.SpanContext().SpanID()]
		for id := range 3 {
			srv := m.find(t, "POST /v1/run", id)
			call, ok := m[srv.Parent().SpanID()]
			if !ok || call.SpanKind() != trace.SpanKindClient {
				t.Fatalf("stage %d's server span's parent is not a recorded client call", id)
			}
			childOf(t, call, rootSpan)
			childOf(t, m.find(t, "stage "+string(rune('a'+id)), id), srv)
		}
	})

	t.Run("remote", func(t *testing.T) {
		deploy := fmt.Sprintf("    - {id: 1, placement: remote, endpoints: [%q]}\n    - {id: 2, placement: remote, endpoints: [%q]}", urls[1][0], urls[2][0])
		front := testkit.Parse(t, strings.Replace(hoptest.TextPipeline, "    - {id: 0, options: {chunks: 2}}", "    - {id: 0, options: {chunks: 2}}\n"+deploy, 1))
		o := orchtest.Start(t, front, orchestrator.Options{Registry: hoptest.Registry(nil), TracerProvider: tp,
			Placements: map[pipeline.Placement]orchestrator.Placement{
				pipeline.PlacementRemote: &remote.Placement{Pipeline: front, Codec: payload.NewCodec([]byte(key)), TracerProvider: tp},
			}}, 10*time.Second)
		rec.Reset()
		s, err := o.Submit(context.Background(), orchestrator.Request{ID: "traced", Prompt: engine.Prompt{Text: "traced remote"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Collect(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The stage servers end their spans as their answers end, which
		// may be just after the request's.
		var m spans
		testkit.Eventually(t, "the stage servers' spans", func() bool {
			m = recorded(rec)
			n := 0
			for _, sp := range m {
				if sp.Name() == "POST /v1/run" && sp.SpanKind() == trace.SpanKindServer {
					n++
				}
			}
			return n == 2
		})
		request := m.find(t, "request text", -1)
		childOf(t, m.find(t, "stage a", 0), request)
		for _, id := range []int{1, 2} {
			name := "stage " + string(rune('a'+id))
			var local sdktrace.ReadOnlySpan
			for _, sp := range m {
				if sp.Name() == name && sp.Parent().SpanID() == request.SpanContext().SpanID() {
					local = sp
				}
			}
			if local == nil {
				t.Fatalf("no %s span under the request", name)
			}
			srv := m.find(t, "POST /v1/run", id)
			call := m[srv.Parent().SpanID()]
			if call == nil || call.SpanKind() != trace.SpanKindClient {
				t.Fatalf("stage %d's server span's parent is not a recorded client call", id)
			}
			childOf(t, call, local)
			// The stage server's own stage span, under its server span.
			var remoteStage sdktrace.ReadOnlySpan
			for _, sp := range m {
				if sp.Name() == name && sp.Parent().SpanID() == srv.SpanContext().SpanID() {
					remoteStage = sp
				}
			}
			if remoteStage == nil {
				t.Errorf("no %s span under stage %d's server span", name, id)
			}
		}
	})
}
