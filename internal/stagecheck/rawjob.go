package stagecheck

// Jobs run by hand on a program: input sent against the program's
// credit, output counted against the check's, every message checked.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// jobBound is how many timeouts the jobs of one case may take in all.
const jobBound = 3

// rawJob is a job the check runs by hand.
type rawJob struct {
	p    *program
	id   int64
	kind engine.Kind // the stage's output kind

	in       []engine.Chunk
	open     bool // input_end is held back: the input stays open
	sent     int  // input chunks sent
	inCredit int  // input chunks the check may send now
	credited int  // input credit the program gave back
	inEnded  bool // input_end sent

	window    int // the output window the job was given
	given     int // output credit the check gave back
	received  int // output chunks received
	out       []engine.Chunk
	cancelled bool // the check sent cancel: output is dropped, input stops

	end   string             // how the job ended: done, error or cancelled; "" while it runs
	fault *stageproto.Header // the error that ended it
	t0    time.Time          // when it started
	took  time.Duration      // how long it ran
}

// rawProgram returns the program the job cases drive by hand: the one of
// an earlier case when it is still healthy, else a fresh one.
func (c *checker) rawProgram(ctx context.Context) (*program, Result, bool) {
	if c.raw != nil && c.raw.alive() {
		return c.raw, Result{}, true
	}
	c.discard()
	p, err := c.ready(ctx)
	if err != nil {
		return nil, fail("%v", err), false
	}
	c.raw = p
	return p, Result{}, true
}

// startJob starts a job on p of in's chunks (and prompt) with params, and
// an output window.
func (c *checker) startJob(p *program, in *Input, chunks []engine.Chunk, params json.RawMessage, window int) (*rawJob, error) {
	if params == nil {
		params = json.RawMessage("null")
	}
	p.jobs++
	j := &rawJob{p: p, id: p.jobs, kind: c.stage.Output, in: chunks, inCredit: c.stage.Window, window: window, t0: time.Now()}
	msg := stageproto.Job{Type: stageproto.TypeJob, Job: j.id, RequestID: "stage-check", Params: params,
		Prompt: in.Prompt, Window: window}
	if err := p.send(msg, nil); err != nil {
		return nil, err
	}
	return j, j.feed()
}

// feed sends input while the program's credit lasts, and input_end after
// the last chunk unless the input is held open.
func (j *rawJob) feed() error {
	for j.inCredit > 0 && j.sent < len(j.in) && j.end == "" && !j.cancelled {
		h, data, err := stageproto.EncodeChunk(j.in[j.sent])
		if err != nil {
			return err
		}
		if err := j.p.send(stageproto.Chunk{Type: stageproto.TypeInput, Job: j.id, ChunkHeader: h}, data); err != nil {
			return err
		}
		j.sent++
		j.inCredit--
	}
	if j.sent == len(j.in) && !j.inEnded && !j.open && j.end == "" && !j.cancelled {
		j.inEnded = true
		return j.p.send(stageproto.JobEvent{Type: stageproto.TypeInputEnd, Job: j.id}, nil)
	}
	return nil
}

// giveCredit gives the program credit for n more output chunks.
func (j *rawJob) giveCredit(n int) error {
	j.given += n
	return j.p.send(stageproto.Credit{Type: stageproto.TypeCredit, Job: j.id, Chunks: n}, nil)
}

// cancel sends cancel.
func (j *rawJob) cancel() error {
	j.cancelled = true
	return j.p.send(stageproto.JobEvent{Type: stageproto.TypeCancel, Job: j.id}, nil)
}

// jobEvent is what one of the program's messages was to a job.
type jobEvent int

const (
	evOther jobEvent = iota // of a type of no concern to the job
	evOutput
	evCredit
	evEnd
)

// route returns the job of jobs m is for; nil for a job that has ended or
// was never sent (its message is dropped, as the runtime does). An error
// without a job is the program's fatal error.
func route(m *message, jobs ...*rawJob) (*rawJob, error) {
	if m.h.Type == stageproto.TypeError && m.h.Job == 0 {
		return nil, fmt.Errorf("it failed (an error of no job, which loses its replica): %s", m.h.Message)
	}
	for _, j := range jobs {
		if j.id == m.h.Job && j.end == "" {
			return j, nil
		}
	}
	return nil, nil
}

// handle takes one of the program's messages of j. An error is a breach
// of the protocol.
func (j *rawJob) handle(m *message) (jobEvent, error) {
	h := &m.h
	switch h.Type {
	case stageproto.TypeOutput:
		ch, err := stageproto.DecodeChunk(&h.ChunkHeader, m.data)
		if err != nil {
			return evOther, fmt.Errorf("its output: %v", err)
		}
		if k := ch.Kind(); k != j.kind {
			return evOther, fmt.Errorf("it sent output of kind %q; it makes %s", k, j.kind)
		}
		if j.received++; j.received > j.window+j.given {
			return evOther, fmt.Errorf("it sent %d output chunks with credit for %d (a window of %d, and %d given back): output beyond its credit",
				j.received, j.window+j.given, j.window, j.given)
		}
		if !j.cancelled {
			j.out = append(j.out, ch)
		}
		return evOutput, nil
	case stageproto.TypeCredit:
		if h.Chunks <= 0 {
			return evOther, fmt.Errorf("it gave credit of %d chunks", h.Chunks)
		}
		if j.credited += h.Chunks; j.credited > j.sent {
			return evOther, fmt.Errorf("it gave credit back for %d input chunks, of %d sent", j.credited, j.sent)
		}
		j.inCredit += h.Chunks
		return evCredit, j.feed()
	case stageproto.TypeCancelled:
		if !j.cancelled {
			return evOther, errors.New("it cancelled a job the check had not cancelled")
		}
		fallthrough
	case stageproto.TypeDone, stageproto.TypeError:
		j.end, j.took = h.Type, took(j.t0)
		if h.Type == stageproto.TypeError {
			j.fault = h
		}
		return evEnd, nil
	}
	return evOther, nil
}

// take takes m when it is j's, as handle does; a message of another job
// is evOther, the program's fatal error an error.
func (j *rawJob) take(m *message) (jobEvent, error) {
	if o, err := route(m, j); err != nil || o == nil {
		return evOther, err
	}
	return j.handle(m)
}

// failed describes the error that ended j: "bad_params naming gain: must
// be a number".
func (j *rawJob) failed() string {
	h := j.fault
	code := h.Code
	if code == "" {
		code = "an error with no code"
	}
	if h.Field != "" {
		code += " naming " + h.Field
	}
	return code + ": " + h.Message
}

// runJobs runs jobs on p until each has ended, giving credit back for each
// output chunk as it comes. An error is a breach of the protocol, the
// program's end, or a wait longer than the timeout.
func (c *checker) runJobs(ctx context.Context, p *program, jobs ...*rawJob) error {
	ctx, stop := c.bound(ctx, p, jobBound*c.opts.Timeout)
	defer stop()
	for open := len(jobs); open > 0; {
		m, err := p.next(ctx, c.opts.Timeout)
		if err != nil {
			return c.stalled(err, jobs...)
		}
		j, err := route(m, jobs...)
		if err != nil {
			return err
		}
		if j == nil {
			continue
		}
		ev, err := j.handle(m)
		switch {
		case err != nil:
			return err
		case ev == evOutput && !j.cancelled:
			err = j.giveCredit(1)
		case ev == evEnd:
			open--
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// bound bounds what a case does with p to d in all, and stops p a second
// after that: a program that reads no input could block the check's
// writes.
func (c *checker) bound(ctx context.Context, p *program, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	watchdog := time.AfterFunc(d+time.Second, p.kill)
	return ctx, func() {
		watchdog.Stop()
		cancel()
	}
}

// stalled says why jobs stopped, once the wait for the program's next
// message ended with err.
func (c *checker) stalled(err error, jobs ...*rawJob) error {
	j := jobs[0]
	for _, o := range jobs {
		if o.end == "" {
			j = o
			break
		}
	}
	at := fmt.Sprintf("after %s (%d of %d input chunks sent)", plural(j.received, "output chunk"), j.sent, len(j.in))
	if j.received == 0 {
		at = fmt.Sprintf("before any output (%d of %d input chunks sent)", j.sent, len(j.in))
	}
	switch {
	case errors.Is(err, errWait):
		return fmt.Errorf("no message within %s %s, with credit for %s", c.opts.Timeout, at, plural(j.window+j.given-j.received, "more output chunk"))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the job did not end within %s, %s", jobBound*c.opts.Timeout, at)
	}
	return fmt.Errorf("%w %s", err, at)
}

// outputOf describes a job's output: "11 audio chunks (1.00 s at 16000
// Hz, 1 end-of-sentence mark)".
func outputOf(out []engine.Chunk) string {
	if len(out) == 0 {
		return "no output"
	}
	kind := out[0].Kind()
	n := plural(len(out), string(kind)+" chunk")
	var samples, marks, bytes, words, frames, items int
	rate := 0
	for _, ch := range out {
		switch {
		case ch.Audio != nil:
			samples += len(ch.Audio.Samples)
			rate = ch.Audio.SampleRate
			if ch.Audio.EndOfSentence {
				marks++
			}
		case ch.Text != nil:
			bytes += len(ch.Text.Text)
		case ch.Data != nil:
			bytes += len(ch.Data.Bytes)
		case ch.Words != nil:
			words += len(ch.Words.Words)
		case ch.Frames != nil:
			frames += ch.Frames.Len()
		case ch.Segments != nil:
			frames += len(ch.Segments.Names)
		case ch.Tensors != nil:
			items += len(ch.Tensors.Tensors)
		case ch.Image != nil:
			bytes += len(ch.Image.Bytes)
		case ch.Regions != nil:
			items += len(ch.Regions.Regions)
		}
	}
	switch kind {
	case engine.KindAudio:
		return fmt.Sprintf("%s (%.2f s at %d Hz, %s)", n, float64(samples)/float64(max(rate, 1)), rate, plural(marks, "end-of-sentence mark"))
	case engine.KindTimestamps:
		return fmt.Sprintf("%s (%d words)", n, words)
	case engine.KindFrames:
		return fmt.Sprintf("%s (%d frames)", n, frames)
	case engine.KindSegments:
		return fmt.Sprintf("%s (%d segments)", n, frames)
	case engine.KindTensor:
		return fmt.Sprintf("%s (%d tensors)", n, items)
	case engine.KindRegions:
		return fmt.Sprintf("%s (%d regions)", n, items)
	}
	return fmt.Sprintf("%s (%d bytes)", n, bytes)
}

// plural is "1 chunk", "2 chunks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
