package hop

// The request body of a streamed call, read with a deadline on each read
// and cut when the call ends.

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyReader reads a streamed request body with a deadline on each read.
// abort cuts a read under way and refuses the next ones, unless the body
// was read to its end: over HTTP/1.1 the deadline is the connection's,
// and once the body has ended the server reads the connection itself (to
// notice a client that goes away, and the next request), which a deadline
// in the past would make fail.
type bodyReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration

	mu      sync.Mutex
	stopped bool
	ended   bool // a read returned io.EOF
}

var errBodyStopped = errors.New("hop: request body no longer read")

// Read implements io.Reader. The deadline bounds this read only: over
// HTTP/2 a deadline is a timer that resets the stream when it fires,
// whether or not a read is under way, and the stage may take long between
// two reads.
func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return 0, errBodyStopped
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	b.mu.Unlock()
	n, err := b.r.Read(p)
	b.mu.Lock()
	if !b.stopped {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	b.ended = b.ended || errors.Is(err, io.EOF)
	b.mu.Unlock()
	return n, err
}

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
