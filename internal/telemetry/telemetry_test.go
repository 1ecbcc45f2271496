package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/telemetry"
	"github.com/omnistage/omnistage/internal/telemetry/telemetrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestOffUnlessAsked(t *testing.T) {
	for _, getenv := range []func(string) string{
		env(),
		env("OTEL_TRACES_EXPORTER", "none"),
		env("OTEL_SDK_DISABLED", "true", "OTEL_TRACES_EXPORTER", "console"),
		env("OTEL_SERVICE_NAME", "x", "OTEL_TRACES_SAMPLER", "always_on"),
	} {
		tr, err := telemetry.FromEnv(context.Background(), getenv, &bytes.Buffer{}, "test")
		if err != nil || tr.TracerProvider() != nil {
			t.Errorf("tracing is on (%v, err %v)", tr.TracerProvider(), err)
		}
	}
}

func TestRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		getenv func(string) string
		want   string
	}{
		{env("OTEL_TRACES_EXPORTER", "zipkin"), `exporter "zipkin" is not built in`},
		{env("OTEL_TRACES_EXPORTER", "console,jaeger"), `exporter "jaeger"`},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\": omnistage exports traces over OTLP/HTTP with protobuf only"},
		{env("OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"), "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		_, err := telemetry.FromEnv(context.Background(), tc.getenv, &bytes.Buffer{}, "test")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}

func TestConsole(t *testing.T) {
	var out bytes.Buffer
	tr, err := telemetry.FromEnv(context.Background(), env("OTEL_TRACES_EXPORTER", "console"), &out, "test")
	if err != nil || tr.TracerProvider() == nil {
		t.Fatalf("tracing off: %v", err)
	}
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "hello span")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"Name":"hello span"`) || !strings.Contains(out.String(), `"omnistage.role"`) {
		t.Errorf("console output lacks the span or its role:\n%s", out.String())
	}
}

// TestOTLP exports to a collector named by the standard variables; the
// process's name and role travel with the spans.
func TestOTLP(t *testing.T) {
	col := telemetrytest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_SERVICE_NAME", "omni-test")
	tr, err := telemetry.FromEnv(context.Background(), nil, &bytes.Buffer{}, "stage")
	if err != nil || tr.TracerProvider() == nil {
		t.Fatalf("tracing off: %v", err)
	}
	ctx, span := tr.Provider.Tracer("t").Start(context.Background(), "parent")
	_, child := tr.Provider.Tracer("t").Start(telemetry.WithTraceparent(context.Background(), telemetry.Traceparent(ctx)), "child")
	child.End()
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	if len(spans) != 2 {
		t.Fatalf("collector got %v, want 2 spans", spans)
	}
	byName := map[string]telemetrytest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.Resource["service.name"] != "omni-test" || s.Resource["omnistage.role"] != "stage" || s.Resource["process.pid"] == "" {
			t.Errorf("span %s has resource %v", s.Name, s.Resource)
		}
	}
	// The child was made from the parent's traceparent alone.
	if p, c := byName["parent"], byName["child"]; c.TraceID != p.TraceID || c.ParentID != p.SpanID {
		t.Errorf("child %v is not parent %v's child", c, p)
	}
}

func TestTraceparent(t *testing.T) {
	if got := telemetry.Traceparent(context.Background()); got != "" {
		t.Errorf("no span: traceparent %q", got)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := telemetry.WithTraceparent(context.Background(), tp)
	if got := telemetry.Traceparent(ctx); got != tp {
		t.Errorf("round trip: %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"} {
		if sc := trace.SpanContextFromContext(telemetry.WithTraceparent(context.Background(), bad)); sc.IsValid() {
			t.Errorf("%q gave a valid span context %v", bad, sc)
		}
	}
}

func TestLogHandler(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&out, nil))).With("request_id", "r1")
	ctx := telemetry.WithTraceparent(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	log.InfoContext(ctx, "traced")
	log.InfoContext(context.Background(), "untraced")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"0af7651916cd43dd8448eb211c80319c"`) || !strings.Contains(lines[0], `"request_id":"r1"`) || strings.Contains(lines[1], "trace_id") {
		t.Errorf("log lines:\n%s", out.String())
	}
}
