package orchestrator

import (
	"context"
	"errors"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// tracedFixture is a fixture whose orchestrator traces into a recorder.
func tracedFixture(t *testing.T, s setup) (*fixture, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s.opts = func(o *Options) { o.TracerProvider = tp }
	return newFixture(t, s), rec
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

func TestTraceSpans(t *testing.T) {
	var seen [3]trace.SpanContext // each stage's engine's ctx span
	f, rec := tracedFixture(t, setup{hooks: testengine.Hooks{
		Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			seen[job.StageID] = trace.SpanContextFromContext(ctx)
			return nil
		},
	}})
	// The caller's span is the request span's parent.
	parentCtx, parent := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "caller")
	defer parent.End()
	s, err := f.o.Submit(parentCtx, Request{ID: "traced", Prompt: engine.Prompt{Text: "hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	var req sdktrace.ReadOnlySpan
	stages := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		switch sp.Name() {
		case "request t":
			req = sp
		default:
			stages[sp.Name()] = sp
		}
	}
	if req == nil {
		t.Fatalf("no request span among %d spans", len(spans))
	}
	if req.Parent().SpanID() != parent.SpanContext().SpanID() || req.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("request span's parent is %v, want the caller's span %v", req.Parent(), parent.SpanContext())
	}
	for id, name := range []string{"stage talker", "stage vocoder", "stage post"} {
		sp := stages[name]
		if sp == nil {
			t.Fatalf("no span %q among %v", name, spans)
		}
		if sp.Parent().SpanID() != req.SpanContext().SpanID() {
			t.Errorf("%s's parent is %v, want the request span", name, sp.Parent())
		}
		want := []string{"bound", "started", "first_output"}
		if id > 0 {
			want = []string{"bound", "prepared", "started", "first_output"}
		}
		if got := eventNames(sp); !slices.Equal(got, want) {
			t.Errorf("%s's events are %v, want %v", name, got, want)
		}
		if attrs := sp.Events()[0].Attributes; len(attrs) != 2 || attrs[1].Key != "omnistage.queue_wait_ms" || attrs[1].Value.AsFloat64() < 0 {
			t.Errorf("%s's bound event has attributes %v, want the replica and the queue wait", name, attrs)
		}
		if !seen[id].Equal(sp.SpanContext()) {
			t.Errorf("stage %d's engine ran under span %v, want its stage span %v", id, seen[id], sp.SpanContext())
		}
		if sp.EndTime().After(req.EndTime()) || sp.StartTime().Before(req.StartTime()) {
			t.Errorf("%s (%v..%v) is not within the request span (%v..%v)", name, sp.StartTime(), sp.EndTime(), req.StartTime(), req.EndTime())
		}
	}
}

func TestTraceFailedStage(t *testing.T) {
	f, rec := tracedFixture(t, setup{hooks: testengine.Hooks{
		Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			if job.StageID == 1 {
				return errors.New("vocoder broke")
			}
			return nil
		},
	}})
	s, err := f.o.Submit(context.Background(), Request{Prompt: engine.Prompt{Text: "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collect(context.Background()); err == nil {
		t.Fatal("the request succeeded")
	}
	var failed []string
	for _, sp := range rec.Ended() {
		if sp.Status().Code.String() == "Error" {
			failed = append(failed, sp.Name())
		}
	}
	slices.Sort(failed)
	if want := []string{"request t", "stage vocoder"}; !slices.Equal(failed, want) {
		t.Errorf("spans with an error status: %v, want %v", failed, want)
	}
}
