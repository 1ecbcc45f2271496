// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, and carries a trace's context where HTTP headers
// do not reach (payloads, the worker protocol, log lines).
//
// Tracing is off unless the environment asks for it: OTEL_TRACES_EXPORTER
// names an exporter, or OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) names a collector. Off, FromEnv
// returns a nil provider and every traced path in omnistage skips its
// tracing on one nil check.
//
// The variables read (the OpenTelemetry specification's names and
// meanings):
//
//   - OTEL_SDK_DISABLED=true turns tracing off whatever else is set.
//   - OTEL_TRACES_EXPORTER: a comma-separated list of otlp (OTLP over
//     HTTP/protobuf), console (one JSON object per span on standard error)
//     and none. Unset, it is otlp when an OTLP endpoint is set, none
//     otherwise.
//   - OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT,
//     OTEL_EXPORTER_OTLP_COMPRESSION, OTEL_EXPORTER_OTLP_CERTIFICATE and
//     their _TRACES_ forms: read by the OTLP/HTTP exporter.
//     OTEL_EXPORTER_OTLP_PROTOCOL (and _TRACES_PROTOCOL) may only be
//     http/protobuf: gRPC is not built in.
//   - OTEL_SERVICE_NAME (default "omnistage") and OTEL_RESOURCE_ATTRIBUTES
//     name the process; omnistage adds omnistage.role (server, stage,
//     worker, run, say, bench) and process.pid.
//   - OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: sampling (default
//     parentbased_always_on, so a sampled caller's decision is kept).
//   - OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE and the other
//     OTEL_BSP_* variables: the batching of spans before export.
//
// The trace context travels as a W3C traceparent (and tracestate): in the
// traceparent header of every HTTP hop, in a /v1/run payload's envelope
// (field trace, so that a chain of /v1/run calls driven by a router that
// passes no headers is still one trace), and in the worker protocol's job
// message.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of omnistage's own spans.
const Name = "github.com/omnistage/omnistage"

// Tracing is the tracing of one process.
type Tracing struct {
	// Provider makes the process's tracers; nil when tracing is off.
	Provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
}

// TracerProvider returns t's provider, or nil when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.Provider
}

// Shutdown exports the spans still buffered and stops the exporters. It is
// a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// FromEnv sets up tracing as the OTEL_* variables (read with getenv; the
// OTLP exporter reads its own from the process environment) ask, for a
// process in the given role. The console exporter writes to console. When
// tracing is on, the provider and the W3C trace-context propagator are
// also installed as OpenTelemetry's globals. A variable with a value
// omnistage cannot honour is an error naming it.
func FromEnv(ctx context.Context, getenv func(string) string, console io.Writer, role string) (*Tracing, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return &Tracing{}, nil
	}
	exporters, err := exportersFromEnv(getenv)
	if err != nil || len(exporters) == 0 {
		return &Tracing{}, err
	}
	var opts []sdktrace.TracerProviderOption
	for _, name := range exporters {
		var exp sdktrace.SpanExporter
		switch name {
		case "otlp":
			if err := checkProtocol(getenv); err != nil {
				return nil, err
			}
			exp, err = otlptracehttp.New(ctx)
		case "console":
			exp, err = stdouttrace.New(stdouttrace.WithWriter(console))
		}
		if err != nil {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %s: %w", name, err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "omnistage"), attribute.String("omnistage.role", role)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the above
		resource.WithProcessPID(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	opts = append(opts, sdktrace.WithResource(res))
	tp := sdktrace.NewTracerProvider(opts...) // samples as OTEL_TRACES_SAMPLER says
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	return &Tracing{Provider: tp, sdk: tp}, nil
}

// exportersFromEnv returns the exporters OTEL_TRACES_EXPORTER names, in
// order and without repeats; none for tracing off.
func exportersFromEnv(getenv func(string) string) ([]string, error) {
	v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if v == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
		v = "otlp"
	}
	var names []string
	for part := range strings.SplitSeq(v, ",") {
		name := strings.ToLower(strings.TrimSpace(part))
		switch name {
		case "none":
			return nil, nil
		case "otlp", "console":
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: exporter %q is not built in; use otlp, console or none", v, name)
		}
	}
	return names, nil
}

// checkProtocol refuses an OTLP protocol other than HTTP/protobuf.
func checkProtocol(getenv func(string) string) error {
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch v := strings.TrimSpace(getenv(key)); v {
		case "":
			continue
		case "http/protobuf":
			return nil
		default:
			return fmt.Errorf("%s=%q: omnistage exports traces over OTLP/HTTP with protobuf only; set http/protobuf (a collector's port 4318)", key, v)
		}
	}
	return nil
}

// Propagator reads and writes a trace's context as W3C traceparent and
// tracestate (and baggage) headers.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
