package hop

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
	"github.com/omnistage/omnistage/internal/payload"
)

// Defaults of Chain.
const (
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	DefaultMaxHops    = 32
	// DefaultAnswerTimeout is Chain.AnswerTimeout's default: a stage
	// server answers at once, before its stage has produced anything.
	DefaultAnswerTimeout = 30 * time.Second
)

// Chain drives requests through a pipeline's stage servers with streamed
// calls: it posts the prompt to stage 0, and as soon as an answer's
// headers arrive it opens a call to the stage the answer names and pipes
// the answer's stream into it, as it comes, until an answer is finished.
// So every stage runs at once, as in one server, and the first audio
// arrives while the text is still being read. The chain keeps no payload:
// it copies the streams' bytes as they are and reads, as they pass, the
// outputs the request selected.
//
// When a call fails before its answer's headers (no answer, or a 5xx),
// Chain makes the same call to the next server of the same stage (calls
// are stateless, so this is safe; what the failed call had read of a
// streamed input is replayed), up to Attempts calls per hop. A 4xx answer
// ends the request at once, as does a failure once an answer is under
// way. A Chain is safe for concurrent use; its fields must not change
// while it runs.
type Chain struct {
	// Client makes the calls; nil means the zero Client.
	Client *Client
	// Stages maps each stage id to the base URLs of its servers. Each hop
	// starts at the next URL round-robin, so concurrent requests spread
	// over a stage's servers; a Chain's first hop to a stage starts at its
	// first URL.
	Stages map[int][]string
	// Attempts bounds the calls of one hop; 0 means one per URL of the
	// stage plus one.
	Attempts int
	// Backoff is the pause before calling a URL that already failed in the
	// same hop, doubled on each further pass over the stage's URLs; 0 means
	// DefaultBackoff. A 503's Retry-After lengthens it, up to MaxBackoff.
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
	// OnHop, when set, is called when a call ends: failed calls, and each
	// hop once its answer has ended. Calls may come from several
	// goroutines, one at a time.
	OnHop func(Hop)

	mu     sync.Mutex
	next   map[int]int // by stage id, the index of the URL the next hop starts at
	report sync.Mutex  // serializes OnHop
}

// Hop describes one call of a chain.
type Hop struct {
	Stage int
	URL   string
	// Attempt counts the calls of this hop, from 1.
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

// StageError is a hop that failed: the last call's error, with the stage
// and URL it came from.
type StageError struct {
	Stage int
	URL   string
	// Attempts is the number of calls the hop made.
	Attempts int
	Err      error
}

func (e *StageError) Error() string {
	if e.Attempts > 1 {
		return fmt.Sprintf("stage %d at %s (after %d attempts): %v", e.Stage, e.URL, e.Attempts, e.Err)
	}
	return fmt.Sprintf("stage %d at %s: %v", e.Stage, e.URL, e.Err)
}

func (e *StageError) Unwrap() error { return e.Err }

// NoServerError is an answer naming a stage that Chain has no URL for.
type NoServerError struct {
	Stage int
}

func (e *NoServerError) Error() string {
	return fmt.Sprintf("no server for stage %d: give its URL", e.Stage)
}

// Result is what a finished chain reports.
type Result struct {
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
// pass; out is never called concurrently (the hops' answers are read at
// once, so its calls come from several goroutines, one at a time). It
// returns when the final answer has ended and every output has been
// handed to out, or at the first failure (a *StageError names the hop),
// or when ctx ends; it ends every call it started before returning.
func (c *Chain) Run(ctx context.Context, req *RunRequest, out OutputFunc) (*Result, error) {
	if out != nil {
		var mu sync.Mutex
		each := out
		out = func(kind engine.Kind, ch engine.Chunk) error {
			mu.Lock()
			defer mu.Unlock()
			return each(kind, ch)
		}
	}
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
	// pumps copy each answer to the next hop; pipes are the next hops'
	// inputs, which fail closes so that no pump stays blocked on one.
	var pumps sync.WaitGroup
	var pipes []*io.PipeReader
	fail := func(err error) (*Result, error) {
		cancel(err)
		for _, p := range pipes {
			p.CloseWithError(context.Cause(ctx))
		}
		pumps.Wait()
		return nil, context.Cause(ctx)
	}
	maxHops := c.MaxHops
	if maxHops <= 0 {
		maxHops = DefaultMaxHops
	}
	input := newReplayReader(bytes.NewReader(body))
	contentType := "application/json"
	res := &Result{}
	for range maxHops {
		a, call, err := c.open(ctx, stage, input, contentType)
		if err != nil {
			return fail(err)
		}
		if res.RequestID == "" {
			res.RequestID = a.RequestID
		}
		if a.Finished {
			if err := c.read(call, a, nil, out); err != nil {
				return fail(err)
			}
			pumps.Wait()
			if err := context.Cause(ctx); err != nil {
				return fail(err)
			}
			res.Stage = a.Stage
			return res, nil
		}
		pr, pw := io.Pipe()
		pipes = append(pipes, pr)
		pumps.Go(func() {
			err := c.read(call, a, pw, out)
			if err != nil {
				// The cause first: the next hop fails once its input
				// does, and its error must not take the cause's place.
				cancel(err)
			}
			pw.CloseWithError(err)
		})
		input, contentType, stage = newReplayReader(pr), ContentType, a.Stage
	}
	return fail(fmt.Errorf("hop: request not finished after %d hops", maxHops))
}

// callInfo is what read needs to report a hop that is under way.
type callInfo struct {
	hop   Hop
	start time.Time
}

// read reads answer a of a call to its end: it copies the stream's bytes
// to next, when there is a next hop, and hands its data to out when the
// request selected it. It reports the hop, and returns the first error,
// naming the hop.
func (c *Chain) read(call *callInfo, a *Answer, next io.Writer, out OutputFunc) (err error) {
	defer a.Body.Close()
	h := call.hop
	h.Next, h.Finished = a.Stage, a.Finished
	defer func() {
		h.Duration = time.Since(call.start)
		if err != nil {
			h.Err = err
			err = &StageError{Stage: h.Stage, URL: h.URL, Attempts: h.Attempt, Err: err}
		}
		c.onHop(h)
	}()
	counted := &countingReader{r: a.Body}
	var body io.Reader = counted
	if next != nil {
		body = io.TeeReader(counted, next)
	}
	// The chain has no key: it reads the frames without checking their
	// tags; the next server and the caller's own checks do.
	sr := payload.NewCodec(nil).NewStreamReader(body)
	if _, _, err := sr.Header(nil); err != nil {
		return answerError(err)
	}
	for {
		chunk, err := sr.Next()
		if errors.Is(err, io.EOF) {
			h.Bytes = counted.n
			return nil
		}
		if err != nil {
			return answerError(err)
		}
		if h.Chunks == 0 {
			h.FirstChunk = time.Since(call.start)
		}
		h.Chunks++
		if a.Output != "" && out != nil {
			if err := out(a.Output, chunk); err != nil {
				return err
			}
		}
	}
}

// answerError types an error reading an answer's stream: an error frame
// becomes an *HTTPError, as if the server had answered with its status; a
// stream that is not what it should be stays a *payload.Error; a stream
// cut short, or a failed read, is a *TransportError (the connection broke).
func answerError(err error) error {
	var se *payload.StreamError
	if errors.As(err, &se) {
		return &HTTPError{Status: se.Status, Code: se.Code, Message: se.Message}
	}
	var pe *payload.Error
	if errors.As(err, &pe) && pe.Code != payload.CodeTruncated {
		return err
	}
	return &TransportError{Err: err}
}

func (c *Chain) onHop(h Hop) {
	if c.OnHop == nil {
		return
	}
	c.report.Lock()
	defer c.report.Unlock()
	c.OnHop(h)
}

// open makes one hop's call to a server of stage, retrying as the Chain's
// doc says, and returns its answer.
func (c *Chain) open(ctx context.Context, stage int, input *replayReader, contentType string) (*Answer, *callInfo, error) {
	urls := c.Stages[stage]
	if len(urls) == 0 {
		return nil, nil, &NoServerError{Stage: stage}
	}
	client := c.Client
	if client == nil {
		client = &Client{}
	}
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = len(urls) + 1
	}
	start := c.start(stage, len(urls))
	var last error
	for a := range attempts {
		if a >= len(urls) {
			if err := sleep(ctx, c.pause(a/len(urls), last)); err != nil {
				return nil, nil, fmt.Errorf("hop: stage %d: %w", stage, err)
			}
		}
		u := urls[(start+a)%len(urls)]
		call := &callInfo{hop: Hop{Stage: stage, URL: u, Attempt: a + 1}, start: time.Now()}
		ans, err := c.openOne(ctx, client, u, input.attempt(), contentType)
		if err == nil {
			input.stopRecording()
			return ans, call, nil
		}
		h := call.hop
		h.Duration, h.Err = time.Since(call.start), err
		h.Retrying = a+1 < attempts && Retryable(err) && ctx.Err() == nil && input.replayable()
		if h.Retrying {
			h.RetryURL = urls[(start+a+1)%len(urls)]
		}
		c.onHop(h)
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("hop: stage %d: %w", stage, context.Cause(ctx))
		}
		if !h.Retrying {
			return nil, nil, &StageError{Stage: stage, URL: u, Attempts: a + 1, Err: err}
		}
		last = err
	}
	panic("unreachable") // the last attempt never retries
}

// openOne makes one call, bounded by AnswerTimeout until its answer
// begins. A call that times out is a *TransportError (retryable); the
// answer's body, once it has begun, is not bounded.
func (c *Chain) openOne(ctx context.Context, client *Client, u string, body io.Reader, contentType string) (*Answer, error) {
	limit := c.AnswerTimeout
	if limit == 0 {
		limit = DefaultAnswerTimeout
	}
	if limit < 0 {
		return client.Open(ctx, u, body, contentType)
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(limit, func() {
		cancel(fmt.Errorf("no answer within %s (a hung or stopped server?)", limit))
	})
	ans, err := client.Open(callCtx, u, body, contentType)
	if !t.Stop() && ctx.Err() == nil {
		// The timer fired: the call's own error is the cancellation.
		if err == nil {
			ans.Body.Close()
		}
		cancel(nil)
		return nil, &TransportError{Err: context.Cause(callCtx)}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	ans.Body = &cancelOnClose{ReadCloser: ans.Body, cancel: func() { cancel(nil) }}
	return ans, nil
}

// cancelOnClose ends a call's context when its answer's body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// start returns the index of the URL a hop to stage starts at, and moves
// the stage's next start on.
func (c *Chain) start(stage, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = map[int]int{}
	}
	i := c.next[stage] % n
	c.next[stage] = (i + 1) % n
	return i
}

// pause returns the wait before a call of the given pass (1 for the second
// pass over a stage's URLs), after the error last.
func (c *Chain) pause(pass int, last error) time.Duration {
	d := c.Backoff
	if d <= 0 {
		d = DefaultBackoff
	}
	ceiling := c.MaxBackoff
	if ceiling <= 0 {
		ceiling = DefaultMaxBackoff
	}
	d <<= min(pass-1, 16)
	var he *HTTPError
	if errors.As(last, &he) && he.RetryAfter > d {
		d = he.RetryAfter
	}
	return min(d, ceiling)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// replayReader is a hop's input, read by one call after another: until a
// call's answer arrives it records what calls read, so that the next call
// of the hop reads it again before the rest. Only the latest call may
// read; an earlier one, which the transport may still be reading for, gets
// an error, and what its read under way brings is kept for the latest.
type replayReader struct {
	src    io.Reader
	readMu sync.Mutex // one read of src at a time; held while it blocks

	mu        sync.Mutex // guards the rest; never held while src blocks
	buf       []byte     // what calls read of src, while recording
	recording bool
	current   *replayCall
	srcErr    error
}

func newReplayReader(src io.Reader) *replayReader {
	return &replayReader{src: src, recording: true}
}

// attempt returns the reader of a new call: it reads what the calls before
// it read, then the rest of the input.
func (r *replayReader) attempt() io.Reader {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = &replayCall{r: r}
	return r.current
}

// stopRecording ends the recording: the latest call got its answer.
func (r *replayReader) stopRecording() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recording = false
}

// replayable reports whether a new call can read the input from its start.
func (r *replayReader) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recording
}

var errStaleCall = errors.New("hop: the input moved on to a later call")

type replayCall struct {
	r   *replayReader
	off int // bytes of r.buf read
}

// fromBuf hands c what is recorded and c has not read yet; ok is false
// when there is nothing, and c must read src. Call it with r.mu held.
func (c *replayCall) fromBuf(p []byte) (n int, ok bool, err error) {
	r := c.r
	if r.current != c {
		return 0, true, errStaleCall
	}
	if c.off < len(r.buf) {
		n = copy(p, r.buf[c.off:])
		c.off += n
		if c.off == len(r.buf) && !r.recording {
			r.buf, c.off = nil, 0
		}
		return n, true, nil
	}
	if r.srcErr != nil {
		return 0, true, r.srcErr
	}
	return 0, false, nil
}

func (c *replayCall) Read(p []byte) (int, error) {
	r := c.r
	r.mu.Lock()
	n, ok, err := c.fromBuf(p)
	r.mu.Unlock()
	if ok {
		return n, err
	}
	r.readMu.Lock()
	defer r.readMu.Unlock()
	// A read that was blocked when this call began may have brought data.
	r.mu.Lock()
	n, ok, err = c.fromBuf(p)
	r.mu.Unlock()
	if ok {
		return n, err
	}
	n, err = r.src.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srcErr = err
	switch {
	case r.current != c:
		// This call went stale while it read: the latest one gets it.
		r.buf = append(r.buf, p[:n]...)
		return 0, errStaleCall
	case r.recording:
		r.buf = append(r.buf, p[:n]...)
		c.off += n
	}
	return n, err
}
