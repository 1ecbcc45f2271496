package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
)

// decodeJSON decodes r's body strictly into dst: unknown fields and
// trailing data are errors. The body is read as it is decoded.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	return s.readingBody(w, func() error { return decodeStrict(r.Body, dst) })
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

func unmarshalStrict(body []byte, dst any) error {
	return decodeStrict(bytes.NewReader(body), dst)
}

func decodeStrict(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && !isSyntax(err) {
			return jsonError(err)
		}
		return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body has data after its JSON value")
	}
	return nil
}

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// jsonError turns a decoding error into a 400 a person can act on.
func jsonError(err error) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	var me *http.MaxBytesError
	switch {
	case errors.As(err, &me):
		return err
	case errors.Is(err, io.EOF):
		return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body is truncated JSON")
	case errors.As(err, &se):
		return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "request body must be a JSON object, not a JSON %s", te.Value)
		}
		return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "field %s: want %s, got a JSON %s", te.Field, jsonType(te.Type.String()), te.Value)
	}
	return httperr.Errorf(http.StatusBadRequest, httperr.CodeInvalidJSON, "invalid request: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case strings.HasPrefix(goType, "float"), strings.HasPrefix(goType, "*float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	}
	return "an object"
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

// Write implements io.Writer.
func (b *bodyWriter) Write(p []byte) (int, error) {
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.timeout))
	return b.w.Write(p)
}

// flush sends what was written to the client.
func (b *bodyWriter) flush() error {
	if err := b.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// send writes p and flushes it: one chunk of a stream.
func (b *bodyWriter) send(p []byte) error {
	if _, err := b.Write(p); err != nil {
		return err
	}
	return b.flush()
}

func (b *bodyWriter) done() { _ = b.rc.SetWriteDeadline(time.Time{}) }
