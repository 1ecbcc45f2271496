package stageserver

// The request body of a streamed call, read under the bounds of a hop's
// input (Limits: a frame's wait to begin, its rate once begun) and cut
// when the call ends.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// bodyReader reads a streamed request body under the hop's input bounds,
// with a deadline on each read. A frame's bytes are owed once its first
// byte has arrived (the header's from the start): each InputWindow the
// server waits in reads for the rest must bring MinInputRate ×
// InputWindow bytes of it, or its end. Between frames the stream may pause
// (its producer has nothing yet) for the idle bound. The frames' reader
// says where a frame begins (nextFrame); only time spent in reads counts,
// not the time the stage takes to want the next frame.
//
// abort cuts a read under way and refuses the next ones, unless the body
// was read to its end: over HTTP/1.1 the deadline is the connection's, and
// once the body has ended the server reads the connection itself (to
// notice a client that goes away, and the next request), which a deadline
// in the past would make fail.
type bodyReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration // the wait for a frame to begin
	lim  Limits

	mu      sync.Mutex
	stopped bool
	ended   bool  // a read returned io.EOF
	failed  error // what a read returned before the hop stopped, but io.EOF or a broken bound
	broke   error // the bound a read broke; every later read returns it
	frame   int   // the frame waited for: 0 is the header
	begun   bool  // some of it arrived
	got     int64 // its bytes in the current window
	waited  time.Duration
}

var errBodyStopped = errors.New("hop: request body no longer read")

// newBodyReader returns the reader of a streamed call's body r, whose
// header is owed from the start.
func newBodyReader(r io.Reader, rc *http.ResponseController, idle time.Duration, lim Limits) *bodyReader {
	return &bodyReader{r: r, rc: rc, idle: idle, lim: lim, begun: true}
}

// Read implements io.Reader. The deadline bounds this read only: over
// HTTP/2 a deadline is a timer that resets the stream when it fires,
// whether or not a read is under way, and the stage may take long between
// two reads.
func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.stopped:
		b.mu.Unlock()
		return 0, errBodyStopped
	case b.broke != nil:
		b.mu.Unlock()
		return 0, b.broke
	}
	rated := b.begun && b.lim.rated()
	limit := b.idle
	if rated {
		limit = b.lim.InputWindow - b.waited
	}
	start := time.Now()
	_ = b.rc.SetReadDeadline(start.Add(limit))
	b.mu.Unlock()
	n, err := b.r.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	took := time.Since(start)
	b.ended = b.ended || errors.Is(err, io.EOF)
	switch {
	case b.begun:
		b.waited += took
		if b.got += int64(n); b.got >= b.lim.windowBytes() {
			b.got, b.waited = 0, 0 // the window brought its share: a new one
		}
	case n > 0:
		b.begun, b.got, b.waited = true, int64(n), 0
	}
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.Is(err, os.ErrDeadlineExceeded) && took >= limit:
		// The read waited its whole bound, whether or not abort came
		// since.
		b.broke = b.stalled(rated)
		err = b.broke
	case b.stopped:
		err = errBodyStopped // the read was cut: no failure of the input
	default:
		b.failed = err
	}
	return n, err
}

// stalled is the error of a read that outlasted its bound: the rate of a
// frame under way (rated), or the pause before a frame.
func (b *bodyReader) stalled(rated bool) error {
	what := fmt.Sprintf("frame %d", b.frame)
	if b.frame == 0 {
		what = "its header"
	}
	if rated {
		return httperr.Errorf(http.StatusRequestTimeout, httperr.CodeBodyTimeout,
			"the request stream stalled in %s: it brought %d bytes in %s, and a frame under way must bring %d bytes, or its end, in every %s (a minimum input rate of %d bytes/s)",
			what, b.got, b.lim.InputWindow, b.lim.windowBytes(), b.lim.InputWindow, b.lim.MinInputRate)
	}
	return httperr.Errorf(http.StatusRequestTimeout, httperr.CodeBodyTimeout,
		"the request stream sent nothing for %s before %s: a hop's input pauses at most that long between frames", b.idle, what)
}

// nextFrame starts the wait for the next frame; buffered is how many of
// its bytes the frames' reader already holds (then it has begun).
func (b *bodyReader) nextFrame(buffered int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frame++
	b.begun, b.got, b.waited = buffered > 0, int64(buffered), 0
}

// isEnded reports whether the body was read to its end.
func (b *bodyReader) isEnded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// inputError is the hop's error for err, an error of the stream read
// from b (not io.EOF): a broken bound is a 408 body_timeout; a read that
// failed with the connection, or a stream that ends early where its body
// did not end cleanly, is errCallerGone (499); a body that is not HTTP's
// (malformed chunks) a 400 bad_request; every other error, a stream whose
// body ended cleanly before its end frame among them (400
// payload_truncated), is err. Each is the caller's doing, never a 5xx,
// and none of these messages names a socket address.
func (b *bodyReader) inputError(err error) error {
	b.mu.Lock()
	ended, broke, failed := b.ended, b.broke, b.failed
	b.mu.Unlock()
	var pe *payload.Error
	switch {
	case broke != nil && errors.Is(err, broke):
		return broke
	case errors.As(err, &pe) && pe.Code == payload.CodeTruncated && !ended:
		return errCallerGone
	case failed != nil && errors.Is(err, failed):
		var oe *net.OpError
		if errors.As(failed, &oe) || errors.Is(failed, io.ErrUnexpectedEOF) {
			return errCallerGone
		}
		return httperr.BadRequest("the request body could not be read: %v", failed)
	}
	return err
}

// errCallerGone is a stream whose connection failed or broke off: its
// caller went away (an abort, 499). It names no socket addresses, as the
// connection's own errors do.
var errCallerGone = &orchestrator.Error{Code: orchestrator.CodeAborted, Msg: "the request stream broke off: the caller went away"}

// abort cuts a read under way and refuses the next ones, if the body has
// not ended. It reports whether the body was left unread: it had not
// ended.
func (b *bodyReader) abort() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped && !b.ended {
		b.stopped = true
		_ = b.rc.SetReadDeadline(time.Now())
	}
	return !b.ended
}

// finish refuses the next reads; the hop is over.
func (b *bodyReader) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
}
