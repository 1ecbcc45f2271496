package orchestrator

// Running a stage's engine on its replica (process): the ctx it runs
// under, and moving a stage whose replica failed before it took anything
// of the request (engine.ErrUnsent: a stage server's connection refused)
// to another replica of the stage.

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
)

// maxRebinds bounds how many other replicas one stage of a request tries
// after its first. Each failed one is taken out of service, so the bound
// matters only while lost replicas come back as fast as they fail.
const maxRebinds = 4

// process runs b's stage on its replica. When the replica is lost before
// it took anything of the request, the stage moves to another healthy
// replica and runs there, while the request lives: nothing was sent, so
// the bound-sender rule does not hold it to the first one. When it is
// lost later and the stage allows it (b.mig), the job runs again on
// another replica, from the start of its first unit not delivered whole
// (migrate.go).
func (rq *request) process(b *binding) error {
	m := b.mig
	if m != nil {
		defer m.log.close()
	}
	for attempt := 0; ; attempt++ {
		ctx := rq.processCtx(b)
		if m != nil {
			ctx = m.begin(ctx, b.replica)
		}
		err := b.replica.Engine.Process(ctx, &b.job)
		var lost error
		if m != nil {
			lost = m.end()
			err = m.sink.settle(err)
		}
		switch {
		case err == nil || rq.ctx.Err() != nil:
			return err
		case m != nil && m.sink.diverged:
			return m.diverged(b)
		case movable(err) && attempt < maxRebinds:
			if !rq.rebind(b, err) {
				return err
			}
		case m != nil && (lost != nil || errors.Is(err, engine.ErrReplicaLost)):
			if lost == nil {
				lost = err
			}
			if err := m.move(b, lost); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// movable reports whether a stage that failed with err may run again on
// another replica: its replica is lost, and nothing of the request
// reached it.
func movable(err error) bool {
	return errors.Is(err, engine.ErrUnsent) && errors.Is(err, engine.ErrReplicaLost)
}

// rebind moves b from its replica, lost with err before it took anything
// of the request, to another one of its stage. It lets go of the lost
// replica first, so that its loss, which takes it out of service at once,
// does not fail the request; then it binds the request to the least
// loaded healthy replica, waiting in the stage's queue if need be. It
// reports whether b has a new replica; when not, the request fails with
// err.
func (rq *request) rebind(b *binding, err error) bool {
	old := b.replica
	b.stage.pool.Release(old, b.holder)
	b.stage.sup.MarkLost(old, err)
	asked := time.Now()
	r, aerr := b.stage.pool.Acquire(rq.ctx, b.holder)
	if aerr != nil {
		// No other replica: the request fails by the loss of its own.
		rq.ReplicaLost(old, err)
		return false
	}
	b.replica = r
	b.stage.retries.Inc()
	b.reboundEvent(old.ID, asked)
	return rq.prepare(b, b.job.Upstream) == nil
}

// processCtx returns the ctx b's engine runs under: rq.ctx, holding the
// stage's noter, b's replica's batch runner when its stage batches, and
// b's stage span when tracing.
func (rq *request) processCtx(b *binding) context.Context {
	// Made on the binding's first call, before its task starts (prepare
	// at binding) or in its task: never at once with another.
	if b.noted.Context == nil {
		b.noter = stageNoter{rq: rq, stage: b.job.StageID}
		b.noted = engine.NoterContext{Context: rq.ctx, Noter: &b.noter}
	}
	var ctx context.Context = &b.noted
	if b.replica.Batches != nil {
		ctx = engine.WithBatches(ctx, b.replica.Batches)
	}
	if b.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, b.span)
}
