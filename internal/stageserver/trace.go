package stageserver

// Tracing of /v1/run (ServerOptions.TracerProvider). Each call whose
// payload is read is one server span, "POST /v1/run", started when the
// call arrived. Its parent is the caller's traceparent header; when the
// call has none (a router that passes no headers), the trace carried in
// the payload: the span of the stage that made it. The answer's payload
// carries this call's span on, so a chain of /v1/run calls across stage
// servers is one trace whose links follow the route. A call refused
// before its payload is read is not traced (its access log line and
// metrics remain). Without a provider the payload's trace passes through
// unchanged.

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// traced starts the span of call c, which arrived at start, and returns r
// with ctx holding it and the function that ends it with the call's
// outcome. With tracing off it returns r and a no-op.
func (s *Server) traced(r *http.Request, c *call, start time.Time, streamed bool) (*http.Request, func(error)) {
	if s.tracer == nil {
		return r, func(error) {}
	}
	ctx := r.Context()
	parent := telemetry.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	if !trace.SpanContextFromContext(parent).IsValid() {
		parent = telemetry.WithTraceparent(ctx, c.env.Trace)
	}
	ctx, span := s.tracer.Start(parent, "POST /v1/run",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.Int("omnistage.stage", c.stage),
			attribute.String("omnistage.stage_name", s.cfg.StageName(c.stage)),
			attribute.String("omnistage.request_id", c.env.RequestID),
			attribute.Bool("omnistage.streamed", streamed),
		))
	telemetry.SetServerSpan(ctx, span.SpanContext())
	c.env.Trace = telemetry.Traceparent(ctx)
	return r.WithContext(ctx), func(err error) { endSpan(span, err) }
}

// endSpan ends a call's span; err is its outcome.
func endSpan(span trace.Span, err error) {
	if err != nil {
		failSpan(span, err)
	}
	span.End()
}

// failSpan marks a call's span failed: by the status its error answers
// with, as an HTTP server span does for a 5xx; a 4xx is the caller's.
func failSpan(span trace.Span, err error) {
	status, _, code := httperr.Classify(err)
	span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("omnistage.error_code", code))
	if status >= 500 {
		span.SetStatus(codes.Error, err.Error())
	}
	span.RecordError(err)
}

// spanFailed marks the span in ctx failed, for an error after a streamed
// answer began.
func spanFailed(ctx context.Context, err error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		failSpan(span, err)
	}
}
