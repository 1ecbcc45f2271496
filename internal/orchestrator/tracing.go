package orchestrator

// The spans of a request and of its stages (Options.TracerProvider).

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/telemetry"
)

// Tracing (Options.TracerProvider). A request is one span, "request
// PIPELINE", child of the span in Submit's ctx (an HTTP server span, or
// none); each of its stages is a child span, "stage NAME", from the moment
// it asks its pool for a replica to the moment its engine returns, with
// events:
//
//   - bound: a replica was bound (attributes omnistage.replica and
//     omnistage.queue_wait_ms, the time the stage waited for it);
//   - prepared: the replica's per-request hand-shake with its upstream
//     (engine.Preparer) is done;
//   - started: the engine's Process began;
//   - rebound: the replica was lost before it took anything of the
//     request, and the stage moved to another (omnistage.replica, the new
//     one, omnistage.lost_replica, omnistage.queue_wait_ms);
//   - first_output: the stage sent its first chunk.
//
// A stage call (SubmitStage) has no request span: its one stage span is a child
// of the span in Submit's ctx (the /v1/run server span). The engine's
// Process gets a ctx holding its stage span, so a remote or worker
// replica's hop is that span's child. With no provider, none of this runs.

// tracer returns o's tracer; nil when tracing is off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(telemetry.Name)
}

// startRequestSpan starts rq's request span, child of ctx's span. For a stage
// call, the stages' parent is ctx's span itself.
func (rq *request) startRequestSpan(ctx context.Context) {
	tr := rq.o.tracer
	if tr == nil {
		return
	}
	if rq.stageCall {
		rq.traceCtx = ctx
		return
	}
	rq.traceCtx, rq.span = tr.Start(ctx, "request "+rq.o.cfg.Pipeline.Name,
		trace.WithTimestamp(rq.submitted),
		trace.WithAttributes(
			attribute.String("omnistage.request_id", rq.id),
			attribute.String("omnistage.pipeline", rq.o.cfg.Pipeline.Name),
			attribute.IntSlice("omnistage.stages", rq.sel.Stages),
		))
}

// startStageSpan starts the span of stage id as it asks its pool for a
// replica; nil when tracing is off.
func (rq *request) startStageSpan(id int, name string) trace.Span {
	tr := rq.o.tracer
	if tr == nil {
		return nil
	}
	_, span := tr.Start(rq.traceCtx, "stage "+name, trace.WithAttributes(
		attribute.Int("omnistage.stage", id),
		attribute.String("omnistage.stage_name", name),
		attribute.String("omnistage.request_id", rq.id),
	))
	return span
}

// failSpan ends a stage span whose stage could not be bound.
func failSpan(span trace.Span, err error) {
	if span != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
	}
}

// stageEvent adds an event to b's stage span, if it has one.
func (b *binding) stageEvent(name string) {
	if b.span != nil {
		b.span.AddEvent(name)
	}
}

// boundEvent adds the bound event, naming the replica and the wait for it
// since asked, to b's stage span, if it has one. (Its attributes are made
// only then: a variadic argument would cost an allocation with tracing
// off.)
func (b *binding) boundEvent(asked time.Time) {
	if b.span != nil {
		b.span.AddEvent("bound", trace.WithTimestamp(b.bound), trace.WithAttributes(
			attribute.String("omnistage.replica", b.replica.ID),
			attribute.Float64("omnistage.queue_wait_ms", float64(b.bound.Sub(asked).Microseconds())/1000)))
	}
}

// migratedEvent adds the migrated event to b's stage span, if it has
// one: the stage moved from replica from, lost mid-stream, to b's
// replica, after a wait since asked, and redoes skipped chunks of output
// that were delivered already.
func (b *binding) migratedEvent(from string, asked time.Time, skipped int) {
	if b.span != nil {
		b.span.AddEvent("migrated", trace.WithAttributes(
			attribute.String("omnistage.replica", b.replica.ID),
			attribute.String("omnistage.lost_replica", from),
			attribute.Int("omnistage.redone_chunks", skipped),
			attribute.Float64("omnistage.queue_wait_ms", float64(time.Since(asked).Microseconds())/1000)))
	}
}

// reboundEvent adds the rebound event to b's stage span, if it has one:
// the stage moved from replica from, lost before it took anything of the
// request, to b's replica, after a wait since asked.
func (b *binding) reboundEvent(from string, asked time.Time) {
	if b.span != nil {
		b.span.AddEvent("rebound", trace.WithAttributes(
			attribute.String("omnistage.replica", b.replica.ID),
			attribute.String("omnistage.lost_replica", from),
			attribute.Float64("omnistage.queue_wait_ms", float64(time.Since(asked).Microseconds())/1000)))
	}
}

// endStageSpan ends b's stage span with the stage's outcome. A stage
// stopped because its request ended first (another stage failed, an
// abort) has not failed itself: its span gets a cancelled event.
func (b *binding) endStageSpan(err error, requestEnded bool) {
	if b.span == nil {
		return
	}
	switch {
	case err != nil && requestEnded:
		b.span.AddEvent("cancelled")
	case err != nil:
		b.span.RecordError(err)
		b.span.SetStatus(codes.Error, err.Error())
	}
	b.span.End(trace.WithTimestamp(b.ended))
}

// endRequestSpan ends rq's request span, and the stage spans of stages
// that never ran (their binding failed), with the request's outcome.
func (rq *request) endRequestSpan(cause error) {
	if rq.o.tracer == nil {
		return
	}
	now := time.Now()
	for i := range rq.bindings {
		if b := &rq.bindings[i]; b.span != nil && b.started.IsZero() {
			b.ended = now
			b.endStageSpan(cause, true) // bound, then another stage could not be
		}
	}
	if rq.span == nil {
		return
	}
	if cause != nil {
		rq.span.SetAttributes(attribute.String("omnistage.error_code", string(CodeOf(cause))))
		rq.span.SetStatus(codes.Error, cause.Error())
	}
	rq.span.End(trace.WithTimestamp(now))
}

// logCtx returns the ctx of rq's log lines: holding its span when traced
// (so they carry its trace id), else no span.
func (rq *request) logCtx() context.Context {
	switch {
	case rq.span != nil:
		return trace.ContextWithSpan(context.Background(), rq.span)
	case rq.traceCtx != nil:
		return rq.traceCtx
	}
	return context.Background()
}
