package stagecheck

// The cases of jobs, driven by hand: one job, jobs at once, a cancel
// mid-stream, input the program must refuse.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// maxConcurrent bounds the jobs the concurrent case runs at once.
const maxConcurrent = 8

// runOne runs one job of chunks (and in's prompt) on p to its end.
func (c *checker) runOne(ctx context.Context, p *program, in *Input, chunks []engine.Chunk, params json.RawMessage) (*rawJob, error) {
	j, err := c.startJob(p, in, chunks, params, stageproto.DefaultWindow)
	if err != nil {
		return nil, err
	}
	return j, c.runJobs(ctx, p, j)
}

// job: one job of a typical input makes output of the stage's kind, ended
// by done.
func (c *checker) job(ctx context.Context) Result {
	if c.input == nil {
		if c.opts.Input != nil {
			return fail("%s", c.noInput)
		}
		return skip("%s", c.noInput)
	}
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	j, err := c.runOne(ctx, p, c.input, c.input.Chunks, nil)
	switch {
	case err != nil:
		return fail("%v", err)
	case j.end != stageproto.TypeDone:
		return fail("the job failed: %s", j.failed())
	}
	what := fmt.Sprintf("%s, then done in %s", outputOf(j.out), j.took)
	if len(j.out) == 0 {
		return warn("done without output in %s: a typical input should make some %s", j.took, c.stage.Output)
	}
	if c.stage.Output == engine.KindAudio {
		if _, err := engine.JoinAudio(j.out); err != nil {
			return fail("%s: %v; the audio of a job keeps one rate", what, err)
		}
		if !endsSentence(j.out) {
			return warn("%s; no end-of-sentence mark: the aligner aligns a sentence as its mark arrives, so a stage that makes speech sends one after each sentence", what)
		}
	}
	return pass("%s", what)
}

func endsSentence(out []engine.Chunk) bool {
	for _, ch := range out {
		if ch.Audio != nil && ch.Audio.EndOfSentence {
			return true
		}
	}
	return false
}

// concurrent: max_jobs jobs at once all end with done, each with the
// output its input makes alone.
func (c *checker) concurrent(ctx context.Context) Result {
	n := min(c.stage.MaxJobs, maxConcurrent)
	if n < 2 {
		return skip("max_jobs is 1: the stage runs one job at a time")
	}
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	inputs := make([]*Input, n)
	distinct := false
	for i := range inputs {
		inputs[i], distinct = c.input.variant(i)
	}
	// What each input makes alone, and whether one input makes the same
	// output twice.
	alone := make([]*rawJob, n+1)
	for i := range alone {
		in := inputs[i%n]
		j, err := c.runOne(ctx, p, in, in.Chunks, nil)
		switch {
		case err != nil:
			return fail("input %d alone: %v", i%n+1, err)
		case j.end != stageproto.TypeDone:
			return fail("input %d alone: the job failed: %s", i%n+1, j.failed())
		}
		alone[i] = j
	}
	at := fmt.Sprintf("%d jobs at once", n)
	ctx, stop := c.bound(ctx, p, jobBound*c.opts.Timeout)
	defer stop()
	jobs := make([]*rawJob, n)
	t0 := time.Now()
	for i, in := range inputs {
		j, err := c.startJob(p, in, in.Chunks, nil, stageproto.DefaultWindow)
		if err != nil {
			return fail("%s: %v", at, err)
		}
		jobs[i] = j
	}
	if err := c.runJobs(ctx, p, jobs...); err != nil {
		return fail("%s: %v", at, err)
	}
	for i, j := range jobs {
		if j.end != stageproto.TypeDone {
			return fail("job %d of %s failed: %s", i+1, at, j.failed())
		}
	}
	if !sameOutput(alone[n].out, alone[0].out) {
		return pass("%s, all done in %s; outputs not compared: one input made different output in two runs", at, took(t0))
	}
	for i, j := range jobs {
		if sameOutput(j.out, alone[i].out) {
			continue
		}
		for k := range n {
			if k != i && distinct && sameOutput(j.out, alone[k].out) {
				return fail("job %d of %s made the output of input %d: jobs' outputs are mixed up", i+1, at, k+1)
			}
		}
		return fail("job %d of %s made %s; its input alone makes %s", i+1, at, outputOf(j.out), outputOf(alone[i].out))
	}
	note := ""
	if !distinct {
		note = " (one input for every job: a mix-up could not show)"
	}
	return pass("%s, all done in %s, each with the output its input makes alone%s", at, took(t0), note)
}

// sameOutput reports whether two jobs' outputs are the same chunks.
func sameOutput(a, b []engine.Chunk) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ha, da, erra := stageproto.EncodeChunk(a[i])
		hb, db, errb := stageproto.EncodeChunk(b[i])
		ja, _ := json.Marshal(ha)
		jb, _ := json.Marshal(hb)
		if erra != nil || errb != nil || !bytes.Equal(ja, jb) || !bytes.Equal(da, db) {
			return false
		}
	}
	return true
}

// cancel: a job cancelled after its first output, its input still open,
// is answered within the protocol's bound, and the program serves the
// next job.
func (c *checker) cancel(ctx context.Context) Result {
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	ctx, stop := c.bound(ctx, p, 2*jobBound*c.opts.Timeout+c.opts.CancelTimeout)
	defer stop()
	j, err := c.startJob(p, c.input, c.input.Chunks, nil, stageproto.DefaultWindow)
	if err != nil {
		return fail("%v", err)
	}
	j.open = true
	when, err := c.firstOutput(ctx, j)
	switch {
	case err != nil:
		return fail("before the cancel: %v", err)
	case j.end == stageproto.TypeDone:
		return skip("the job ended (done) by itself with its input still open, before a cancel could be sent")
	case j.end != "":
		return fail("the job failed before its cancel: %s", j.failed())
	}
	t0 := time.Now()
	if err := j.cancel(); err != nil {
		return fail("%v", err)
	}
	for j.end == "" {
		m, err := p.next(ctx, time.Until(t0.Add(c.opts.CancelTimeout)))
		switch {
		case errors.Is(err, errWait):
			return fail("no answer to cancel within %s", c.opts.CancelTimeout)
		case err != nil:
			return fail("after the cancel: %v", err)
		}
		if _, err := j.take(m); err != nil {
			return fail("after the cancel: %v", err)
		}
	}
	answer := fmt.Sprintf("answered the cancel (sent %s) with %s in %s", when, j.end, took(t0))
	if j.end == stageproto.TypeError {
		answer = fmt.Sprintf("answered the cancel (sent %s) with an error in %s (%s)", when, took(t0), j.failed())
	}
	next, err := c.runOne(ctx, p, c.input, c.input.Chunks, nil)
	switch {
	case err != nil:
		return fail("%s, but then: %v", answer, err)
	case next.end != stageproto.TypeDone:
		return fail("%s, but then the next job failed: %s", answer, next.failed())
	}
	return pass("%s; the next job made %s", answer, outputOf(next.out))
}

// firstOutput waits for j's first output chunk, or its end, for at most
// the timeout; it says when the cancel that follows is sent.
func (c *checker) firstOutput(ctx context.Context, j *rawJob) (string, error) {
	deadline := time.Now().Add(c.opts.Timeout)
	for j.end == "" {
		m, err := j.p.next(ctx, time.Until(deadline))
		if errors.Is(err, errWait) {
			return fmt.Sprintf("after %s without output, its input open", c.opts.Timeout), nil
		}
		if err != nil {
			return "", c.stalled(err, j)
		}
		ev, err := j.take(m)
		if err != nil {
			return "", err
		}
		if ev == evOutput {
			return "after the first output", nil
		}
	}
	return "", nil
}

// badInput: a chunk of a kind the stage does not take is refused with a
// job error (bad_input, or failed), not with a crash or silence.
func (c *checker) badInput(ctx context.Context) Result {
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	chunk := wrongKind(c.stage.Input)
	what := fmt.Sprintf("a chunk of %s (it takes %s)", chunk.Kind(), c.stage.Input)
	j, err := c.runOne(ctx, p, &Input{Prompt: sentence}, []engine.Chunk{chunk}, nil)
	switch {
	case err != nil:
		return fail("given %s: %v", what, err)
	case j.end == stageproto.TypeDone:
		return warn("took %s and said done (%s): it should refuse it with bad_input", what, outputOf(j.out))
	case j.fault.Code == stageproto.CodeBadInput:
		return pass("refused %s: %s", what, j.failed())
	case j.fault.Code == stageproto.CodeBadParams:
		return warn("refused %s with bad_params, which blames the request's params: %s", what, j.failed())
	}
	return pass("refused %s: %s (bad_input would make it the client's 400, not a 500)", what, j.failed())
}
