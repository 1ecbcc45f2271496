package orchestrator

// Migration: a request whose replica of a stage is lost mid-stream goes
// on on another replica of the stage, from the start of the first unit of
// work whose output was not delivered whole (engine.Replay), where the
// stage allows it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pool"
)

// The outcomes of omnistage_migrations_total: the request moved, or it
// failed with its lost replica, for the reason the outcome names.
const (
	migrated          = "migrated"
	migrateNoReplica  = "no_replica" // no other replica of the stage was up
	migrateQueueFull  = "queue_full" // the others were busy and the stage's queue full
	migrateLimit      = "limit"      // the request had moved max_migrations times
	migrateUnretained = "unretained" // its input was past what a stage keeps
	migrateDiverged   = "diverged"   // a deterministic replay made other chunks
)

// migration is one stage of a request that may move to another replica
// when its replica is lost mid-stream: the pool.Holder of its binding,
// the input it keeps and the output it splices (the job's In and Out).
type migration struct {
	rq   *request
	log  inputLog
	sink replaySink

	mu      sync.Mutex
	replica *pool.Replica           // the replica of the run under way
	cancel  context.CancelCauseFunc // ends that run; nil between runs
	run     context.Context         // the run's ctx, while it is under way

	// Room for the input kept and the hashes of the output delivered of
	// a short request, which then allocates nothing more.
	chunkBuf [4]engine.Chunk
	hashBuf  [8]uint64

	// The loss that made the stage move last, for the error of a move
	// that fails later (a replay that diverged).
	lostFrom  string
	lostCause error
}

// lostRun is what a run is cancelled with when its replica is lost.
type lostRun struct{ err error }

func (e *lostRun) Error() string { return e.err.Error() }
func (e *lostRun) Unwrap() error { return e.err }

// holderFor returns what binds rq to a replica of st: a migration when
// the stage allows a request to move (st.replay), else rq itself.
func (rq *request) holderFor(st *stageRun) (pool.Holder, *migration) {
	if st.replay == nil {
		return rq, nil
	}
	m := &migration{rq: rq}
	return m, m
}

// wrap makes job read its input through m's log and send its output
// through m's sink, which sends on to out.
func (m *migration) wrap(job *engine.Job, out *stageSink, deterministic bool) {
	m.log = inputLog{up: job.In, chunks: m.chunkBuf[:0]}
	m.sink = replaySink{out: out, log: &m.log, hash: deterministic, hashes: m.hashBuf[:0], lastUnit: -1, fromUnit: -1, unit: -1}
	job.In, job.Out = &m.log, &m.sink
}

// ReplicaLost implements pool.Holder: the run on r, if one is under way,
// ends, and the stage moves on (request.process). The loss of a replica
// the stage no longer runs on (its job is done, or it moved) changes
// nothing.
func (m *migration) ReplicaLost(r *pool.Replica, cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil && m.replica == r {
		m.cancel(&lostRun{cause})
	}
}

// begin starts a run on r under ctx, and returns the run's ctx, which
// ends when r is lost. end ends the run.
func (m *migration) begin(ctx context.Context, r *pool.Replica) context.Context {
	rctx, cancel := context.WithCancelCause(ctx)
	m.mu.Lock()
	m.replica, m.cancel, m.run = r, cancel, rctx
	m.mu.Unlock()
	m.sink.cancel = cancel
	if !r.Healthy() {
		// Lost between its binding and this run, when nothing heard it.
		cancel(&lostRun{fmt.Errorf("%s: %w", r.ID, engine.ErrReplicaLost)})
	}
	return rctx
}

// end ends the run begin started, and returns the loss that ended it, if
// one did.
func (m *migration) end() error {
	m.mu.Lock()
	cancel, rctx := m.cancel, m.run
	m.cancel, m.run = nil, nil
	m.mu.Unlock()
	lr, lost := context.Cause(rctx).(*lostRun)
	cancel(nil)
	if lost {
		return lr.err
	}
	return nil
}

// move takes b's job, whose replica was lost with cause, to another
// healthy replica of its stage, waiting in the stage's queue if they are
// all busy, and readies the job's next run there. When it cannot (no
// other replica, the request's limit, input no longer kept) the request
// fails with the loss, and move returns that error.
func (m *migration) move(b *binding, cause error) error {
	rq, st, old := m.rq, b.stage, b.replica
	m.lostFrom, m.lostCause = old.ID, cause
	// Let go of the lost replica first, so that its loss, which takes it
	// out of service at once, does not end the next run.
	st.pool.Release(old, m)
	st.sup.MarkLost(old, cause)
	if limit := rq.o.cfg.Deploy.MaxMigrations; int(rq.migrations.Add(1)) > limit {
		return m.fail(b, migrateLimit, fmt.Sprintf("the request moved %d times already (max_migrations)", limit))
	}
	if !m.log.retained() {
		return m.fail(b, migrateUnretained, fmt.Sprintf("its input passed the %d bytes kept for a replay", maxReplayBytes))
	}
	asked := time.Now()
	r, err := st.pool.AcquireHealthy(rq.ctx, m)
	switch {
	case err == nil:
	case context.Cause(rq.ctx) != nil:
		return context.Cause(rq.ctx)
	case errors.Is(err, pool.ErrQueueFull):
		return m.fail(b, migrateQueueFull, "the stage's other replicas are busy and its queue is full")
	default:
		return m.fail(b, migrateNoReplica, "no other replica of the stage to go on with")
	}
	b.replica = r
	if err := rq.prepare(b, b.job.Upstream); err != nil {
		return err
	}
	m.log.rewind()
	m.sink.rewind()
	st.migrations.WithLabelValues(migrated).Inc()
	b.migratedEvent(old.ID, asked, m.sink.skip)
	rq.o.log.Warn("request moved to another replica", "request_id", rq.id, "stage", st.id, "from", old.ID, "to", r.ID,
		"cause", cause, "redone_chunks", m.sink.skip)
	return nil
}

// fail fails the request with the stage's last loss, which it could not
// recover from for the reason why, counting the outcome.
func (m *migration) fail(b *binding, outcome, why string) error {
	b.stage.migrations.WithLabelValues(outcome).Inc()
	err := &ReplicaLostError{Stage: b.job.StageID, Name: b.stage.name, Replica: m.lostFrom, Err: m.lostCause, Why: why}
	m.rq.cancel(err)
	return err
}

// diverged fails the request whose replay on b's replica made other
// chunks than the lost replica had delivered.
func (m *migration) diverged(b *binding) error {
	return m.fail(b, migrateDiverged, fmt.Sprintf("its replay on %s made other output than it had delivered", b.replica.ID))
}
