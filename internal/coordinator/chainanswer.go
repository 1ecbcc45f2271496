package coordinator

// A Chain's answer once begun: its stream read up to its first chunk, the
// bytes read so far held for the next call, and a bound on each of its
// silences.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/payload"
)

// callInfo is what a call's readers need to report it.
type callInfo struct {
	report CallReport
	start  time.Time
	// silence returns why the call's context ended when one of its
	// silences outlasted its bound (see watch), else nil.
	silence func() error
}

// streamError types an error reading the call's answer stream: a silence
// past its bound is a *TransportError that says so, whatever the read
// then saw; otherwise see hop.AnswerError.
func (c *callInfo) streamError(err error) error {
	if cause := c.silence(); cause != nil {
		return &hop.TransportError{Err: cause}
	}
	return hop.AnswerError(err)
}

// begun is an answer whose stream has begun: its header and its first
// data frame are read (or its end, when it has none). Until then nothing
// of it went anywhere, so the call could still be made elsewhere.
type begun struct {
	a     *hop.Answer
	call  *callInfo
	sr    *payload.StreamReader
	body  *answerBody
	first *engine.Chunk // nil when ended
	ended bool
}

// begin reads a's stream up to its first chunk. A hand-off answer's
// bytes are held meanwhile, for the next call (answerBody.handOn).
func begin(a *hop.Answer, call *callInfo, w *watch) (*begun, error) {
	body := &answerBody{r: a.Body, w: w, hold: !a.Finished}
	// The chain has no key: it reads the frames without checking their
	// tags; the next server and the caller's own checks do.
	b := &begun{a: a, call: call, sr: payload.NewCodec(nil).NewStreamReader(body), body: body}
	if _, _, err := b.sr.Header(nil); err != nil {
		return nil, call.streamError(err)
	}
	chunk, err := b.sr.Next()
	switch {
	case errors.Is(err, io.EOF):
		b.ended = true
	case err != nil:
		return nil, call.streamError(err)
	default:
		b.first = &chunk
		call.report.FirstChunk = time.Since(call.start)
	}
	return b, nil
}

// answerBody reads an answer's body: it counts the bytes, tells the watch
// of each, and passes them on as they are, once handed on (before, it
// holds them).
type answerBody struct {
	r    io.Reader
	w    *watch
	n    int64
	hold bool // hold what is read until handOn
	held bytes.Buffer
	next io.Writer // set by handOn
}

func (b *answerBody) Read(p []byte) (int, error) {
	b.w.arm()
	n, err := b.r.Read(p)
	b.w.disarm()
	if n == 0 {
		return n, err
	}
	b.n += int64(n)
	switch {
	case b.next != nil:
		if _, werr := b.next.Write(p[:n]); werr != nil {
			return n, werr
		}
	case b.hold:
		b.held.Write(p[:n])
	}
	return n, err
}

// handOn passes what was read so far to next, and from then on every
// byte as it is read.
func (b *answerBody) handOn(next io.Writer) error {
	b.next = next
	_, err := next.Write(b.held.Bytes())
	b.held = bytes.Buffer{}
	return err
}

// watch bounds the silences of one call: the wait for its answer to begin
// (Chain.AnswerTimeout), then each wait for a byte of its body
// (Chain.IdleTimeout). One past its bound ends the call's context with
// why, so that a server that stopped (or hangs) after its answer began
// fails the call instead of holding the request. Only the chain's own
// waits count: not the time the chain takes to hand a byte on (the next
// call pushing back), nor a wait while the call's input waits for its
// upstream, whose own silence is the one to blame.
type watch struct {
	cancel context.CancelCauseFunc
	answer time.Duration // <= 0: no bound
	idle   time.Duration // <= 0: no bound
	t      *time.Timer
	begun  atomic.Bool
	// starved counts the reads of the call's input under way that wait
	// for its upstream.
	starved atomic.Int32
}

func (c *Chain) newWatch(cancel context.CancelCauseFunc) *watch {
	w := &watch{cancel: cancel, answer: c.AnswerTimeout, idle: c.IdleTimeout}
	if w.answer == 0 {
		w.answer = DefaultAnswerTimeout
	}
	if w.idle == 0 {
		w.idle = w.answer
	}
	w.t = time.AfterFunc(max(w.answer, time.Hour), w.fire)
	if w.answer > 0 {
		w.t.Reset(w.answer)
	} else {
		w.t.Stop()
	}
	return w
}

func (w *watch) fire() {
	if w.starved.Load() > 0 {
		// The call waits for its input: its upstream is the silent one.
		w.t.Reset(w.bound())
		return
	}
	if w.begun.Load() {
		w.cancel(fmt.Errorf("no byte of the answer for %s (a hung or stopped server?)", w.idle))
		return
	}
	w.cancel(fmt.Errorf("no answer within %s (a hung or stopped server?)", w.answer))
}

// bound is the bound of the wait under way.
func (w *watch) bound() time.Duration {
	if w.begun.Load() {
		return w.idle
	}
	return w.answer
}

// began moves the watch on from the answer's wait to its body's, which
// arm and disarm bound.
func (w *watch) began() {
	w.begun.Store(true)
	w.t.Stop()
}

// arm starts the bound of a read of the answer's body; disarm ends it.
func (w *watch) arm() {
	if w.idle > 0 {
		w.t.Reset(w.idle)
	}
}

func (w *watch) disarm() { w.t.Stop() }

func (w *watch) stop() { w.t.Stop() }

// input returns the call's input r, whose reads that wait tell the watch
// that the call is starved.
func (w *watch) input(r io.Reader) io.Reader { return &starvedReader{r: r, w: w} }

// starvedReader is a call's input as its watch sees it.
type starvedReader struct {
	r io.Reader
	w *watch
}

func (s *starvedReader) Read(p []byte) (int, error) {
	s.w.starved.Add(1)
	defer s.w.starved.Add(-1)
	return s.r.Read(p)
}
