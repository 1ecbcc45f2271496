package telemetry

// Trace context in and out of strings (traceparent), and the log handler
// that adds trace ids.

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traceparent returns the W3C traceparent of ctx's span ("" when ctx has
// no valid span context): what a payload or a worker job carries.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx with the remote span context a traceparent
// names as its parent. A malformed or empty traceparent leaves ctx as it
// is: a trace context is a hint, never a reason to refuse work.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// MaxTraceparent bounds the traceparent a payload may carry: version 00's
// is 55 characters; later versions may append fields.
const MaxTraceparent = 256

// LogHandler wraps h so that each record logged with a context holding a
// span carries trace_id and span_id attributes.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.Handler.WithGroup(name)}
}

// SpanSlot holds the span context of a request's server span when the
// span is started below the handler that logs the request (as /v1/run's
// is, once its payload has named its parent): that handler makes the slot,
// the one that starts the span fills it.
type SpanSlot struct{ sc trace.SpanContext }

type slotKey struct{}

// WithSpanSlot returns ctx holding a new, empty slot.
func WithSpanSlot(ctx context.Context) (context.Context, *SpanSlot) {
	s := &SpanSlot{}
	return context.WithValue(ctx, slotKey{}, s), s
}

// SetServerSpan leaves sc in ctx's slot, if ctx has one. The slot is read
// after the handler has returned, by the goroutine that called it.
func SetServerSpan(ctx context.Context, sc trace.SpanContext) {
	if s, ok := ctx.Value(slotKey{}).(*SpanSlot); ok {
		s.sc = sc
	}
}

// Context returns ctx holding the slot's span context, when it has one
// and ctx holds no valid span already. A nil slot returns ctx.
func (s *SpanSlot) Context(ctx context.Context) context.Context {
	if s == nil || !s.sc.IsValid() || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, s.sc)
}
