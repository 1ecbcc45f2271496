package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/omnistage/omnistage/internal/httpbody"
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

func (s *Server) newBodyWriter(w http.ResponseWriter) *httpbody.Writer {
	return httpbody.NewWriter(w, s.opts.ChunkWriteTimeout)
}
