// Package coordinator drives whole requests across stage servers over
// streamed /v1/run calls (package hop), as `omnistage run` does: the
// reference for an external router. It keeps no state on the servers;
// every call is self-contained.
package coordinator

// Chain: Run drives one request through the stage servers, piping each
// answer into the next call as it arrives, and reports every call. A
// Chain bounds every silence of its calls' answers.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
)

// Defaults of Chain.
const (
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	DefaultMaxHops    = 32
	// DefaultAnswerTimeout is Chain.AnswerTimeout's default, and
	// IdleTimeout's: a stage server answers at once, before its stage has
	// produced anything, and its stage's output pauses only while the
	// stage works (a sentence).
	DefaultAnswerTimeout = 30 * time.Second
)

// Chain drives requests through a pipeline's stage servers with streamed
// calls: it posts the prompt to stage 0, and as soon as an answer's first
// chunk arrives it opens a call to the stage the answer names and pipes
// the answer's stream into it, as it comes, until an answer is finished.
// So every stage runs at once, as in one server, and the first audio
// arrives while the text is still being read. The chain keeps no payload:
// it copies the streams' bytes as they are and reads, as they pass, the
// outputs the request selected.
//
// Every silence of a call is bounded: the wait for its answer to begin
// (AnswerTimeout), then each wait for a byte of the answer (IdleTimeout),
// so a server that stops or hangs mid-answer fails the call instead of
// holding the request forever.
//
// A call fails over while nothing of its answer has gone anywhere: when
// it fails before its answer's first chunk (no answer, a 5xx or an error
// frame of one, a silence past its bound, a stream cut short), Chain
// makes the same call to the next server of the same stage (calls are
// stateless, so this is safe), up to Attempts calls for one stage of a
// request, as long as all the failed call read of its input can be sent
// again: the chain holds what the calls to a stage read of their input
// until one's answer has begun (stage 0's is the request itself; a later
// stage's, the earlier answer's stream, up to maxReplay bytes). Once an
// answer has passed a chunk on, to the next call or to the caller, its
// call is bound: a failure ends the request, as a 4xx answer does at
// once. A Chain is safe for concurrent use; its fields must not change
// while it runs.
type Chain struct {
	// Client makes the calls; nil means the zero Client.
	Client *hop.Client
	// Stages maps each stage id to the base URLs of its servers. The calls
	// of each request to a stage start at the next URL round-robin, so
	// concurrent requests spread over a stage's servers; a Chain's first
	// call to a stage goes to its first URL.
	Stages map[int][]string
	// Attempts bounds the calls of one request to one stage; 0 means one
	// per URL of the stage plus one.
	Attempts int
	// Backoff is the pause before calling a URL that already failed for the
	// same stage of the request, doubled on each further pass over the
	// stage's URLs; 0 means DefaultBackoff. A 503's Retry-After lengthens it, up to MaxBackoff.
	Backoff time.Duration
	// MaxBackoff caps one pause; 0 means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxHops bounds the stages one request goes through, against servers
	// that keep answering "not finished"; 0 means DefaultMaxHops.
	MaxHops int
	// AnswerTimeout bounds the wait for a call's answer to begin (its
	// headers): a server that accepted the connection but does not answer
	// (hung, stopped) fails the call, which may then go to another server.
	// 0 means DefaultAnswerTimeout; negative, no bound.
	AnswerTimeout time.Duration
	// IdleTimeout bounds each wait for a byte of an answer once it has
	// begun: a server that stops mid-answer fails the call. 0 means
	// AnswerTimeout; negative, no bound.
	IdleTimeout time.Duration
	// OnCall, when set, is called with the report of every call when it
	// ends: a failed call at once, one that got an answer once its answer
	// has ended. Calls may come from several goroutines, one at a time.
	OnCall func(CallReport)

	mu       sync.Mutex
	next     map[int]int // by stage id, the index of the URL the next request's calls start at
	onCallMu sync.Mutex  // serializes OnCall
}

// CallReport describes one call of a chain, for Chain.OnCall: one /v1/run
// call to one server of a stage, the first or a retry.
type CallReport struct {
	Stage int
	URL   string
	// Attempt counts the calls of the request to this stage, from 1.
	Attempt int
	// FirstChunk is the time from the call to the first data frame of its
	// answer; 0 when none came.
	FirstChunk time.Duration
	// Duration is the time from the call to the end of its answer.
	Duration time.Duration
	// Chunks and Bytes count the answer's data frames and bytes.
	Chunks int
	Bytes  int64
	// Next is the stage the answer went on to, when not Finished.
	Next     int
	Finished bool
	// Err is why the call failed, nil on success.
	Err error
	// Retrying is true when Chain will call again after this failure, at
	// RetryURL (this URL again when the stage has no other).
	Retrying bool
	RetryURL string
}

// CallError is the failure of a Chain's calls for one stage of a request:
// the last call's error, with the stage and the URL it came from.
type CallError struct {
	Stage int
	URL   string
	// Attempts is the number of calls made for the stage.
	Attempts int
	Err      error
}

func (e *CallError) Error() string {
	if e.Attempts > 1 {
		return fmt.Sprintf("stage %d at %s (after %d attempts): %v", e.Stage, e.URL, e.Attempts, e.Err)
	}
	return fmt.Sprintf("stage %d at %s: %v", e.Stage, e.URL, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// NoServerError is an answer naming a stage that Chain has no URL for.
type NoServerError struct {
	Stage int
}

func (e *NoServerError) Error() string {
	return fmt.Sprintf("no server for stage %d: give its URL", e.Stage)
}

// Outcome is what a finished Chain.Run reports.
type Outcome struct {
	// RequestID is the request's id, from the first answer.
	RequestID string
	// Stage is the stage whose answer finished the request.
	Stage int
}

// OutputFunc takes one chunk of an output the request selected, as it
// passes; kind is the output's kind. Chunks of one output come in order.
// An error ends the request.
type OutputFunc func(kind engine.Kind, c engine.Chunk) error

// Run drives req, stage 0's request (StageID nil means 0), through the
// chain, calling out with the chunks of every selected output as they
// pass; out is never called concurrently (the answers of the calls are
// read at once, so its calls come from several goroutines, one at a time).
// It returns when the final answer has ended and every output has been
// handed to out, or at the first failure (a *CallError names the stage and
// URL), or when ctx ends; it ends every call it started before returning.
func (c *Chain) Run(ctx context.Context, req *hop.RunRequest, out OutputFunc) (*Outcome, error) {
	stage := 0
	if req.StageID != nil {
		stage = *req.StageID
	} else {
		r := *req
		r.StageID = &stage
		req = &r
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("hop: encode request: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	run := &chainRun{ctx: ctx, cancel: cancel, out: serialized(out)}
	maxHops := c.MaxHops
	if maxHops <= 0 {
		maxHops = DefaultMaxHops
	}
	input := newReplayReader(bytes.NewReader(body))
	contentType := "application/json"
	res := &Outcome{}
	for range maxHops {
		b, err := c.open(ctx, stage, input, contentType)
		if err != nil {
			return nil, run.fail(err)
		}
		a := b.a
		if res.RequestID == "" {
			res.RequestID = a.RequestID
		}
		if a.Finished {
			if err := c.finish(run, b); err != nil {
				return nil, err
			}
			res.Stage = a.Stage
			return res, nil
		}
		input, contentType, stage = newReplayReader(c.handOn(run, b)), hop.ContentType, a.Stage
	}
	return nil, run.fail(fmt.Errorf("hop: request not finished after %d hops", maxHops))
}

// serialized returns out made safe for calls from several goroutines, which
// it takes one at a time.
func serialized(out OutputFunc) OutputFunc {
	if out == nil {
		return nil
	}
	var mu sync.Mutex
	return func(kind engine.Kind, ch engine.Chunk) error {
		mu.Lock()
		defer mu.Unlock()
		return out(kind, ch)
	}
}

// chainRun is one request on its way through a Chain: the answers being
// copied into the next calls, and how to stop them all.
type chainRun struct {
	ctx    context.Context // the request's; its cause is the run's failure
	cancel context.CancelCauseFunc
	out    OutputFunc // serialized
	// pumps copy each answer to the next call; pipes are the next calls'
	// inputs, which fail closes so that no pump stays blocked on one.
	pumps sync.WaitGroup
	pipes []*io.PipeReader
}

// fail ends the run with err, or with the cause it already ended with: it
// ends every call and pump, and returns the cause.
func (r *chainRun) fail(err error) error {
	r.cancel(err)
	for _, p := range r.pipes {
		p.CloseWithError(context.Cause(r.ctx))
	}
	r.pumps.Wait()
	return context.Cause(r.ctx)
}

// handOn starts copying answer b, as it comes, into the input of the next
// call, which it returns.
func (c *Chain) handOn(r *chainRun, b *begun) io.Reader {
	pr, pw := io.Pipe()
	r.pipes = append(r.pipes, pr)
	r.pumps.Go(func() {
		err := c.read(b, pw, r.out)
		if err != nil {
			// The cause first: the next hop fails once its input
			// does, and its error must not take the cause's place.
			r.cancel(err)
		}
		pw.CloseWithError(err)
	})
	return pr
}

// finish reads the final answer b to its end and waits until the answers
// before it have been read too; it returns the run's failure, if any.
func (c *Chain) finish(r *chainRun, b *begun) error {
	if err := c.read(b, nil, r.out); err != nil {
		return r.fail(err)
	}
	r.pumps.Wait()
	if err := context.Cause(r.ctx); err != nil {
		return r.fail(err)
	}
	return nil
}

// read reads answer b of a call to its end: it copies the stream's bytes
// to next, when there is a next call, and hands its data to out when the
// request selected it. It reports the call, and returns the first error
// as a *CallError.
func (c *Chain) read(b *begun, next io.Writer, out OutputFunc) (err error) {
	a, call := b.a, b.call
	defer a.Body.Close()
	h := call.report
	h.Next, h.Finished = a.Stage, a.Finished
	defer func() {
		h.Duration = time.Since(call.start)
		if err != nil {
			h.Err = err
			err = &CallError{Stage: h.Stage, URL: h.URL, Attempts: h.Attempt, Err: err}
		}
		c.onCall(h)
	}()
	if next != nil {
		if err := b.body.handOn(next); err != nil {
			return &hop.TransportError{Err: err}
		}
	}
	for chunk, ended := b.first, b.ended; !ended; {
		h.Chunks++
		if a.Output != "" && out != nil {
			if err := out(a.Output, *chunk); err != nil {
				return err
			}
		}
		more, err := b.sr.Next()
		switch {
		case errors.Is(err, io.EOF):
			ended = true
		case err != nil:
			return call.streamError(err)
		default:
			chunk = &more
		}
	}
	h.Bytes = b.body.n
	return nil
}

func (c *Chain) onCall(h CallReport) {
	if c.OnCall == nil {
		return
	}
	c.onCallMu.Lock()
	defer c.onCallMu.Unlock()
	c.OnCall(h)
}
