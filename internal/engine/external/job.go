package external

// One job: a request at this stage, run by the program.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// job is the runtime's side of one job.
type job struct {
	id   int64
	kind engine.Kind // the stage's output kind
	// out holds the job's output chunks as the reader gets them, and its
	// end; the program may send no more than its credit, so the reader
	// never waits on it.
	out chan event
	// credit holds the credit messages the program gave for the job's
	// input, until the pump needs them.
	credit chan int

	// What the silence timeout reads: the input chunks sent and credited,
	// whether the input has ended, whether the pump waits on the upstream
	// stage, and when the job last moved (unix nanos: a chunk sent or
	// taken).
	sent, credited       atomic.Int64
	inputEnded, upstream atomic.Bool
	active               atomic.Int64

	// outCredit is the output the program may still send: the window,
	// less what it sent, plus the credit given back.
	outCredit atomic.Int64
}

// idle is how long the job has been silent while the program holds work
// it has not answered: input it has not credited, or its whole input. A
// job whose program has taken all its input and waits for more from the
// upstream stage is not idle: the wait is the upstream's.
func (j *job) idle() time.Duration {
	waiting := j.upstream.Load() && j.credited.Load() >= j.sent.Load() && !j.inputEnded.Load()
	if waiting {
		return 0
	}
	return time.Since(time.Unix(0, j.active.Load()))
}

// event is one output chunk of a job, or its end (end set; err nil when
// the job is done, cancelled true when the program answered a cancel).
type event struct {
	job       *job
	chunk     engine.Chunk
	end       bool
	cancelled bool
	err       error
}

// deliver hands the job a message of the program's (on the reader's
// goroutine). An error breaches the protocol.
func (j *job) deliver(e *Engine, h *stageproto.Header, data []byte) error {
	ev := event{job: j}
	switch h.Type {
	case stageproto.TypeCredit:
		if h.Chunks <= 0 {
			return fmt.Errorf("credit of %d chunks for job %d", h.Chunks, j.id)
		}
		if j.credited.Add(int64(h.Chunks)) > j.sent.Load() {
			return fmt.Errorf("credit for more input chunks of job %d than were sent", j.id)
		}
		select {
		case j.credit <- h.Chunks:
		default:
			return fmt.Errorf("more credit for job %d than it has input chunks to send", j.id)
		}
		return nil
	case stageproto.TypeOutput:
		if j.outCredit.Add(-1) < 0 {
			return fmt.Errorf("job %d: output beyond the credit the runtime gave", j.id)
		}
		c, err := stageproto.DecodeChunk(&h.ChunkHeader, data)
		if err != nil {
			return fmt.Errorf("job %d: output: %w", j.id, err)
		}
		if k := c.Kind(); k != j.kind {
			return fmt.Errorf("job %d: output of kind %q; the stage makes %s", j.id, k, j.kind)
		}
		ev.chunk = c
	case stageproto.TypeDone:
		ev.end = true
	case stageproto.TypeCancelled:
		ev.end, ev.cancelled = true, true
	case stageproto.TypeError:
		ev.end, ev.err = true, jobError(h)
	}
	e.endJobIf(j, ev.end)
	select {
	case j.out <- ev:
		return nil
	default:
		return fmt.Errorf("job %d: output beyond the credit the runtime gave", j.id)
	}
}

// jobError is the error of a job the program failed.
func jobError(h *stageproto.Header) error {
	switch h.Code {
	case stageproto.CodeBadParams:
		return &engine.ParamError{Field: h.Field, Reason: h.Message}
	case stageproto.CodeBadInput:
		return &engine.InputError{Reason: h.Message}
	}
	if h.Message == "" {
		return errors.New("the program failed the job, without a message")
	}
	return errors.New(h.Message)
}

// endJobIf forgets j once its end has come: later messages of it are
// dropped.
func (e *Engine) endJobIf(j *job, end bool) {
	if end {
		e.mu.Lock()
		delete(e.jobs, j.id)
		e.mu.Unlock()
	}
}

// outputWindow is the output credit of a job: the output chunks the
// program may send before the runtime takes them.
const outputWindow = stageproto.DefaultWindow

// Process implements engine.Engine: the program runs jb, as a job, or,
// when it takes batches, as units in the runtime's batches (RunBatch).
func (e *Engine) Process(ctx context.Context, jb *engine.Job) error {
	if err := e.Loss.Err(); err != nil {
		return err
	}
	if e.info.MaxBatch > 0 {
		return e.processUnits(ctx, jb)
	}
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.Lost():
		return e.Loss.Err()
	}
	defer func() { <-e.slots }()
	j, err := e.startJob(jb)
	if err != nil {
		return err
	}
	return e.run(ctx, j, jb)
}

// startJob registers a job for jb and sends it to the program.
func (e *Engine) startJob(jb *engine.Job) (*job, error) {
	j := &job{id: e.nextID.Add(1), kind: e.spec.Output,
		out: make(chan event, outputWindow+1), credit: make(chan int, e.info.Window)}
	j.active.Store(time.Now().UnixNano())
	j.outCredit.Store(outputWindow)
	e.mu.Lock()
	e.jobs[j.id] = j
	e.mu.Unlock()
	params := jb.Params
	if len(params) == 0 {
		params = []byte("null")
	}
	msg := stageproto.Job{Type: stageproto.TypeJob, Job: j.id, RequestID: jb.RequestID, StageID: jb.StageID,
		Params: params, Prompt: jb.Prompt.Text, Window: outputWindow}
	if err := e.w.Write(msg, nil); err != nil {
		e.endJobIf(j, true)
		return nil, e.writeError(err)
	}
	return j, nil
}

// writeError is the error of a job whose message could not be written:
// one past the framing's limits (a *stageproto.ProtocolError: nothing was
// written) fails the job alone; otherwise the program's input is gone, so
// the replica is.
func (e *Engine) writeError(err error) error {
	var pe *stageproto.ProtocolError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: stage %d (%s): %w", Name, e.spec.StageID, e.spec.Name, err)
	}
	e.lose(lossWrite, err)
	return e.Loss.Err()
}

// run relays j's output to jb.Out, giving credit as it goes, while pump
// sends its input, until the job ends, fails or is cancelled.
func (e *Engine) run(ctx context.Context, j *job, jb *engine.Job) error {
	pctx, stopPump := context.WithCancel(ctx)
	pumped := make(chan error, 1)
	go func() { pumped <- e.pump(pctx, j, jb.In) }()
	defer func() {
		stopPump()
		if pumped != nil {
			<-pumped
		}
	}()
	silence := newSilence(e.spec.Timeout)
	defer silence.stop()
	taken := 0 // output chunks taken and not yet credited
	for {
		select {
		case ev := <-j.out:
			if ev.end {
				return e.ended(j, ev)
			}
			if e.losing.Load() {
				// Nothing more of a replica being lost goes on: its loss is
				// the job's error, not what its last chunks would cost
				// downstream (the request's audio limit).
				<-e.Lost()
				return e.Loss.Err()
			}
			if err := jb.Out.Send(ctx, ev.chunk); err != nil {
				return e.cancel(j, err)
			}
			j.active.Store(time.Now().UnixNano())
			if taken++; taken >= stageproto.CreditBatch(outputWindow) {
				j.outCredit.Add(int64(taken))
				if err := e.w.Write(stageproto.Credit{Type: stageproto.TypeCredit, Job: j.id, Chunks: taken}, nil); err != nil {
					return e.writeError(err)
				}
				taken = 0
			}
		case err := <-pumped:
			pumped = nil
			if err != nil && ctx.Err() == nil {
				return e.cancel(j, err)
			}
		case <-ctx.Done():
			return e.cancel(j, ctx.Err())
		case <-e.Lost():
			return e.Loss.Err()
		case <-silence.c:
			if idle := j.idle(); idle >= e.spec.Timeout {
				return e.cancel(j, fmt.Errorf("%s: stage %d (%s) made nothing for %s of its input (timeout %s)",
					Name, e.spec.StageID, e.spec.Name, idle.Round(time.Millisecond), e.spec.Timeout))
			} else {
				silence.reset(e.spec.Timeout - idle)
			}
		}
	}
}

// ended is Process's result for the end of j the program sent.
func (e *Engine) ended(j *job, ev event) error {
	switch {
	case ev.err != nil:
		return ev.err
	case ev.cancelled:
		return fmt.Errorf("%s: the program cancelled job %d, which the runtime had not cancelled", Name, j.id)
	}
	return nil
}

// pump sends in to the program as j's input, each chunk against the
// program's credit, then input_end. It returns nil once it has sent the
// whole input, or why it stopped.
func (e *Engine) pump(ctx context.Context, j *job, in engine.Source) error {
	credit := e.info.Window
	for {
		j.upstream.Store(true)
		c, err := in.Recv(ctx)
		j.upstream.Store(false)
		if errors.Is(err, io.EOF) {
			j.inputEnded.Store(true)
			if err := e.w.Write(stageproto.JobEvent{Type: stageproto.TypeInputEnd, Job: j.id}, nil); err != nil {
				return e.writeError(err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		for _, piece := range stageproto.SplitChunk(c) {
			for credit == 0 {
				select {
				case n := <-j.credit:
					credit += n
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			h, data, err := stageproto.EncodeChunk(piece)
			if err != nil {
				return err
			}
			// Counted before it is written: the program may answer with credit
			// before Write returns.
			j.sent.Add(1)
			if err := e.w.Write(stageproto.Chunk{Type: stageproto.TypeInput, Job: j.id, ChunkHeader: h}, data); err != nil {
				return e.writeError(err)
			}
			credit--
			j.active.Store(time.Now().UnixNano())
		}
	}
}

// cancel cancels j in the program and waits for its answer, dropping the
// job's output meanwhile; it returns cause. A program that does not answer
// within the cancel timeout is broken: its replica is lost.
func (e *Engine) cancel(j *job, cause error) error {
	if err := e.w.Write(stageproto.JobEvent{Type: stageproto.TypeCancel, Job: j.id}, nil); err != nil {
		e.endJobIf(j, true)
		_ = e.writeError(err)
		return cause
	}
	t := time.NewTimer(e.cfg.CancelTimeout)
	defer t.Stop()
	for {
		select {
		case ev := <-j.out:
			if ev.end {
				return cause
			}
			e.dropped.Add(1)
		case <-t.C:
			e.endJobIf(j, true)
			e.lose(lossCancel, fmt.Errorf("job %d, within %s", j.id, e.cfg.CancelTimeout))
			return cause
		case <-e.Lost():
			return cause
		}
	}
}
