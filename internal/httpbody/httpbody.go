// Package httpbody writes HTTP answers: whole JSON ones, and streamed
// bodies under a deadline per write, so that a client that stops reading
// cannot hold a request forever, while a long stream is never cut by a
// deadline on the whole answer.
package httpbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
)

// WriteJSON writes v as a complete JSON answer with status and its
// Content-Length. A v that does not encode (a bug) becomes a 500.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httperr.Write(w, http.StatusInternalServerError, httperr.TypeServer, "internal_error", fmt.Sprintf("encoding the response: %v", err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Writer writes a response body. Each Write, WriteString and Flush must
// finish within the timeout; the deadline is lifted as soon as each one is
// done, because over HTTP/2 a deadline is a timer that resets the stream
// when it fires, whether or not a write is under way. Done lifts the
// deadline for good, for the next request on the connection.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// NewWriter returns a Writer of w's body with timeout per operation.
func NewWriter(w http.ResponseWriter, timeout time.Duration) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// Write implements io.Writer.
func (b *Writer) Write(p []byte) (int, error) {
	defer b.deadline()()
	return b.w.Write(p)
}

// WriteString implements io.StringWriter, without copying s.
func (b *Writer) WriteString(s string) (int, error) {
	defer b.deadline()()
	return io.WriteString(b.w, s)
}

// Flush sends what was written.
func (b *Writer) Flush() error {
	defer b.deadline()()
	return b.flush()
}

// Send writes p and flushes it, under one deadline: one chunk of a stream.
func (b *Writer) Send(p []byte) error {
	defer b.deadline()()
	if _, err := b.w.Write(p); err != nil {
		return err
	}
	return b.flush()
}

func (b *Writer) flush() error {
	if err := b.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// deadline sets the deadline of one operation and returns what lifts it.
func (b *Writer) deadline() func() {
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
	return b.Done
}

// Done lifts the deadline.
func (b *Writer) Done() { _ = b.rc.SetWriteDeadline(time.Time{}) }
