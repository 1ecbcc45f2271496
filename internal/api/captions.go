package api

// POST /v1/audio/captions: the captions of a speech request's speech.

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/captions"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
)

// captions answers POST /v1/audio/captions: the body of a speech request
// whose response_format is a caption format (vtt, the default, or srt).
// It speaks the text as /v1/audio/speech would, with the same voice and
// speed, aligns it, and answers with the captions of that speech: the
// engines are deterministic, so they fit the audio a speech request with
// the same fields returns.
func (s *Server) captions(w http.ResponseWriter, r *http.Request) {
	var req apijson.SpeechRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	format := strings.ToLower(req.ResponseFormat)
	if format == "" {
		format = "vtt"
	}
	if !slices.Contains(captions.Formats, format) {
		s.fail(w, r, httperr.BadRequest("response_format %q is not a caption format: use vtt or srt", req.ResponseFormat))
		return
	}
	if req.StreamFormat != "" {
		s.fail(w, r, httperr.BadRequest("captions are not streamed: leave stream_format out (stream_format sse on /v1/audio/speech streams the timestamps)"))
		return
	}
	req.ResponseFormat = formatPCM
	p, err := s.parseSpeech(r, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.req.Modalities = []string{string(engine.KindTimestamps)}
	st, err := p.pipeline.orch.Submit(r.Context(), p.req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer st.Close()
	setRequestID(w, r, st.ID())
	outs, err := st.Collect(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var words []engine.Word
	for _, o := range outs {
		words = append(words, engine.JoinWords(o.Chunks)...)
	}
	var b bytes.Buffer
	if err := captions.Write(&b, format, captions.Cues(req.Input, words)); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", captions.ContentType(format))
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	body := s.newBodyWriter(w)
	defer body.Done()
	if _, err := body.Write(b.Bytes()); err != nil {
		s.streamFailed(r, err)
	}
}
