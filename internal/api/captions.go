package api

// POST /v1/audio/captions: the captions of a speech request's speech.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/captions"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// captionsRequest is the body of POST /v1/audio/captions: a speech
// request's fields, and the response_format of the audio the captions go
// with, whose timeline they follow.
type captionsRequest struct {
	apijson.SpeechRequest
	AudioFormat string `json:"audio_format,omitempty"`
}

// captions answers POST /v1/audio/captions: the body of a speech request
// whose response_format is a caption format (vtt, the default, or srt).
// It speaks the text as /v1/audio/speech would, with the same voice and
// speed, aligns it, and answers with the captions of that speech: the
// engines are deterministic, so they fit the audio a speech request with
// the same fields returns, in the audio_format the request names (moved
// by its leadMs, for aac), or in any format without one.
func (s *Server) captions(w http.ResponseWriter, r *http.Request) {
	var req captionsRequest
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
	audioFormat := strings.ToLower(req.AudioFormat)
	if _, ok := encode.ContentType(audioFormat); !ok && audioFormat != "" {
		s.fail(w, r, httperr.BadRequest("unknown audio_format %q: name the response_format of the speech the captions go with, one of %s", req.AudioFormat, strings.Join(encode.Formats(), ", ")))
		return
	}
	req.ResponseFormat = formatPCM
	p, err := s.parseSpeech(r, &req.SpeechRequest)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.req.Modalities = []string{string(engine.KindTimestamps)}
	if audioFormat != "" {
		// For the audio's rate, which the format's delay depends on.
		p.req.Modalities = append(p.req.Modalities, string(engine.KindAudio))
	}
	st, err := p.pipeline.orch.Submit(r.Context(), p.req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer st.Close()
	setRequestID(w, r, st.ID())
	words, rate, err := wordsAndRate(r.Context(), st)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if audioFormat != "" {
		words = shiftWords(words, leadMs(audioFormat, rate, false))
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

// wordsAndRate receives st to its end and returns its word timestamps and
// the sample rate of its audio, if it selected audio (0 if not), without
// keeping the audio.
func wordsAndRate(ctx context.Context, st *orchestrator.Stream) ([]engine.Word, int, error) {
	var words []engine.Word
	rate := 0
	for {
		o, err := st.Recv(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return words, rate, nil
		case err != nil:
			return nil, 0, err
		case o.Chunk.Words != nil:
			words = append(words, o.Chunk.Words.Words...)
		case o.Chunk.Audio != nil && rate == 0:
			rate = o.Chunk.Audio.SampleRate
		}
	}
}
