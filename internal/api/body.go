package api

// Request and response bodies: strict JSON decoding under the body read
// deadline, and the writer of response bodies.

import (
	"errors"
	"net/http"
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
	err := read()
	var he *httperr.Error
	if errors.As(err, &he) && he.Code == httperr.CodeBodyTimeout {
		// The rest of the body may never come: net/http must not wait
		// for it before answering, nor read the next request after it.
		w.Header().Set("Connection", "close")
	}
	return err
}

func (s *Server) newBodyWriter(w http.ResponseWriter) *httpbody.Writer {
	return httpbody.NewWriter(w, s.opts.ChunkWriteTimeout)
}
