package stagecheck

// The case of batches, driven by hand: a batch message of several jobs,
// one of which the stage must refuse, each answered on its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// maxBatchJobs bounds the jobs of the batch case's batch of typical
// inputs.
const maxBatchJobs = 4

// batchJob is one job of a batch the check sends: its input chunk and
// params.
type batchJob struct {
	chunk  engine.Chunk
	params json.RawMessage
}

// runBatch sends one batch message of jobs on p and runs it until each
// job has ended, giving no credit (the runtime gives none for a job of a
// batch): output past a job's window, or credit from the program, is a
// breach of the protocol.
func (c *checker) runBatch(ctx context.Context, p *program, jobs []batchJob) ([]*rawJob, error) {
	ctx, stop := c.bound(ctx, p, jobBound*c.opts.Timeout)
	defer stop()
	raws := make([]*rawJob, len(jobs))
	entries := make([]stageproto.BatchEntry, len(jobs))
	for i, bj := range jobs {
		h, data, err := stageproto.EncodeChunk(bj.chunk)
		if err != nil {
			return nil, err
		}
		params := bj.params
		if params == nil {
			params = json.RawMessage("null")
		}
		p.jobs++
		entries[i], err = stageproto.NewBatchEntry(stageproto.BatchJob{Job: p.jobs, RequestID: "stage-check", Params: params, Prompt: sentence, ChunkHeader: h}, data)
		if err != nil {
			return nil, err
		}
		raws[i] = &rawJob{p: p, id: p.jobs, kind: c.stage.Output, in: []engine.Chunk{bj.chunk}, window: stageproto.DefaultWindow, inEnded: true, t0: time.Now()}
	}
	if err := p.w.WriteBatch(stageproto.DefaultWindow, entries); err != nil {
		return nil, fmt.Errorf("writing to the program: %w", err)
	}
	for open := len(raws); open > 0; {
		m, err := p.next(ctx, c.opts.Timeout)
		if err != nil {
			return nil, c.stalled(err, raws...)
		}
		j, err := route(m, raws...)
		if err != nil {
			return nil, err
		}
		if j == nil {
			continue
		}
		ev, err := j.handle(m)
		switch {
		case err != nil:
			return nil, fmt.Errorf("job %d of the batch: %w", j.id, err)
		case ev == evEnd:
			open--
		}
	}
	return raws, nil
}

// batch: a stage whose hello has max_batch answers a batch of typical
// inputs, and one of a kind it does not take (and one with a param of the
// wrong type, when it declares params), each job on its own: the typical
// ones done with the output each makes in a batch alone, the others
// refused.
func (c *checker) batch(ctx context.Context) Result {
	switch {
	case c.stage.MaxBatch == 0:
		return skip("hello has no max_batch: the stage takes jobs, not batches")
	case c.input == nil:
		return skip("%s", c.noInput)
	}
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	n := min(c.stage.MaxBatch, maxBatchJobs)
	var typical []batchJob
	distinct := false
	for i := range n {
		in, d := c.input.variant(i)
		typical, distinct = append(typical, batchJob{chunk: in.Chunks[0]}), d
	}
	alone := make([]*rawJob, n)
	for i, bj := range typical {
		js, err := c.runBatch(ctx, p, []batchJob{bj})
		switch {
		case err != nil:
			return fail("a batch of input %d alone: %v", i+1, err)
		case js[0].end != stageproto.TypeDone:
			return fail("a batch of input %d alone: the job failed: %s", i+1, js[0].failed())
		}
		alone[i] = js[0]
	}
	jobs := append(typical, batchJob{chunk: wrongKind(c.stage.Input), params: nil})
	bad := fmt.Sprintf("a chunk of %s", wrongKind(c.stage.Input).Kind())
	var param string
	if len(c.stage.Params) > 0 {
		name, params := c.wrongParam()
		jobs = append(jobs, batchJob{chunk: typical[0].chunk, params: params})
		param = name
	}
	// In batches of the program's max_batch at most: one, but for a
	// program that takes fewer jobs than the check has.
	var js []*rawJob
	for start := 0; start < len(jobs); start += c.stage.MaxBatch {
		got, err := c.runBatch(ctx, p, jobs[start:min(start+c.stage.MaxBatch, len(jobs))])
		if err != nil {
			return fail("a batch of %d jobs: %v", min(c.stage.MaxBatch, len(jobs)-start), err)
		}
		js = append(js, got...)
	}
	at := fmt.Sprintf("a batch of %d jobs", len(jobs))
	if len(jobs) > c.stage.MaxBatch {
		at = fmt.Sprintf("batches of %d jobs in all", len(jobs))
	}
	for i := range typical {
		switch j := js[i]; {
		case j.end != stageproto.TypeDone:
			return fail("job %d of %s (a typical input) failed: %s", i+1, at, j.failed())
		case distinct && !sameOutput(j.out, alone[i].out):
			return fail("job %d of %s made %s; its input in a batch alone makes %s", i+1, at, outputOf(j.out), outputOf(alone[i].out))
		}
	}
	what := fmt.Sprintf("%s: the %d typical ones done", at, n)
	if distinct {
		what += ", each with the output its input makes alone"
	}
	refused := js[n]
	switch {
	case refused.end == stageproto.TypeDone:
		return warn("%s; it took %s and said done: it should refuse it with bad_input", what, bad)
	case refused.fault.Code != stageproto.CodeBadInput:
		what += fmt.Sprintf("; %s refused with %s (bad_input would make it the client's 400, not a 500)", bad, refused.failed())
	default:
		what += fmt.Sprintf("; %s refused: %s", bad, refused.failed())
	}
	if param != "" {
		switch j := js[n+1]; {
		case j.end == stageproto.TypeDone:
			return warn("%s; a job with a %s of the wrong type ran: the stage takes any value of it", what, param)
		case j.fault.Code != stageproto.CodeBadParams || j.fault.Field != param:
			return fail("%s; a job with a %s of the wrong type failed with %s; want bad_params naming %s", what, param, j.failed(), param)
		}
		what += fmt.Sprintf("; a %s of the wrong type refused: %s", param, js[n+1].failed())
	}
	return pass("%s", what)
}
