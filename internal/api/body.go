package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
)

// decodeJSON decodes r's body strictly into dst: unknown fields and
// trailing data are errors. The body is read as it is decoded.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	return s.readingBody(w, func() error { return httperr.DecodeJSON(r.Body, dst) })
}

// readingBody runs read, which reads the request body (bounded by the
// route's size limit), under the body read deadline, and lifts the
// deadline afterwards so that a long response stream is not cut by it.
func (s *Server) readingBody(w http.ResponseWriter, read func() error) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	return read()
}

// writeJSON writes v as a complete JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
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

// bodyWriter writes a response body with a deadline on each write, so a
// client that stops reading cannot hold a request forever, and flushes
// when asked. done lifts the deadline for the next request on the
// connection.
type bodyWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *Server) newBodyWriter(w http.ResponseWriter) *bodyWriter {
	return &bodyWriter{w: w, rc: http.NewResponseController(w), timeout: s.opts.ChunkWriteTimeout}
}

// Write implements io.Writer. The deadline is lifted once the write is
// done: over HTTP/2 a deadline is a timer that resets the stream when it
// fires, whether or not a write is under way.
func (b *bodyWriter) Write(p []byte) (int, error) {
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
	defer b.rc.SetWriteDeadline(time.Time{})
	return b.w.Write(p)
}

// flush sends what was written to the client.
func (b *bodyWriter) flush() error {
	if err := b.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// send writes p and flushes it, under one deadline: one chunk of a
// stream.
func (b *bodyWriter) send(p []byte) error {
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
	defer b.rc.SetWriteDeadline(time.Time{})
	if _, err := b.w.Write(p); err != nil {
		return err
	}
	return b.flush()
}

func (b *bodyWriter) done() { _ = b.rc.SetWriteDeadline(time.Time{}) }
