package api

// POST /v1/audio/speech: the request and its checks, and the answer with
// the whole file (speechstream.go streams it).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/api/requestid"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// The speech response formats (package encode has them all; wav and pcm
// are written here) and stream formats.
const (
	formatWAV     = encode.WAV
	formatPCM     = encode.PCM
	defaultFormat = encode.MP3 // as OpenAI's

	streamWhole = ""
	streamAudio = "audio"
	streamSSE   = "sse"
)

// MaxTimestampsHeader is the longest X-Word-Timestamps response header
// value. Longer timestamps are left out, and X-Word-Timestamps-Omitted says
// so: proxies commonly refuse response headers beyond 4 to 8 KiB, and no
// fallback inside one audio response works with every client (Go's client,
// for one, refuses HTTP trailers longer than 4 KiB and fails the body).
// stream_format "sse" and POST /v1/generate carry timestamps of any length.
const MaxTimestampsHeader = 4 << 10

// Headers of POST /v1/audio/speech.
const (
	headerSampleRate        = "X-Sample-Rate"
	headerTimestamps        = "X-Word-Timestamps"
	headerTimestampsOmitted = "X-Word-Timestamps-Omitted"
	headerStreamError       = "X-Stream-Error"
	// headerStageTimings asks a stream_format sse answer for its
	// speech.stages event, which no OpenAI client expects.
	headerStageTimings = "X-Stage-Timings"
)

var errNoAudio = errors.New("the pipeline produced no audio")

// speechPlan is a checked speech request.
type speechPlan struct {
	pipeline   *served
	format     string
	stream     string
	timestamps bool
	stages     bool // a speech.stages event (headerStageTimings)
	chars      int
	req        orchestrator.Request
}

func (s *Server) parseSpeech(r *http.Request, req *apijson.SpeechRequest) (*speechPlan, error) {
	pl, err := s.textModel(req.Model, true, r.URL.Path)
	if err != nil {
		return nil, err
	}
	if req.Input == "" {
		return nil, httperr.BadRequest("input is missing or empty: send the text to speak")
	}
	p := &speechPlan{pipeline: pl, chars: utf8.RuneCountInString(req.Input)}
	p.format = strings.ToLower(req.ResponseFormat)
	if p.format == "" {
		p.format = defaultFormat
	}
	switch err := encode.Available(p.format); {
	case errors.Is(err, encode.ErrUnsupported):
		return nil, httperr.BadRequest("unknown response_format %q: use %s (pcm is raw 16-bit little-endian mono samples at the rate in the X-Sample-Rate header)", req.ResponseFormat, strings.Join(encode.Formats(), ", "))
	case err != nil:
		return nil, httperr.BadRequest("response_format %q is not available on this server: %v", req.ResponseFormat, err)
	}
	switch f := req.StreamFormat; f {
	case streamWhole, streamAudio, streamSSE:
		p.stream = f
	default:
		return nil, httperr.BadRequest("unknown stream_format %q: use audio (chunked audio) or sse (server-sent events)", f)
	}
	var tp talker.Params
	if req.Voice.ID != "" {
		v, err := resolveVoice(pl, req.Voice.ID)
		if err != nil {
			return nil, err
		}
		tp.Voice = v
	}
	if req.Speed != nil {
		if !talker.SpeedOK(*req.Speed) {
			return nil, httperr.BadRequest("speed %g is outside %g..%g", *req.Speed, talker.MinSpeed, talker.MaxSpeed)
		}
		tp.Speed = req.Speed
	}
	if h := r.Header.Get(headerTimestamps); h != "" {
		b, err := strconv.ParseBool(h)
		if err != nil {
			return nil, httperr.BadRequest("header %s is %q; want true or false", headerTimestamps, h)
		}
		p.timestamps = b
	}
	if h := r.Header.Get(headerStageTimings); h != "" {
		b, err := strconv.ParseBool(h)
		if err != nil {
			return nil, httperr.BadRequest("header %s is %q; want true or false", headerStageTimings, h)
		}
		p.stages = b
	}
	if p.timestamps && p.stream == streamAudio {
		return nil, httperr.BadRequest("word timestamps cannot ride on chunked audio (stream_format audio): use stream_format sse, which sends a speech.word_timestamps event, or no stream_format, which sends the %s header", headerTimestamps)
	}
	id, err := requestid.From(r, "")
	if err != nil {
		return nil, err
	}
	p.req = orchestrator.Request{ID: id, Prompt: engine.Prompt{Text: req.Input}, Modalities: []string{string(engine.KindAudio)}}
	if p.timestamps {
		p.req.Modalities = append(p.req.Modalities, string(engine.KindTimestamps))
	}
	if p.req.Params, err = tp.SamplingParams(pl.cfg.Route.NumIDs()); err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Server) speech(w http.ResponseWriter, r *http.Request) {
	var req apijson.SpeechRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.parseSpeech(r, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st, err := p.pipeline.orch.Submit(r.Context(), p.req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer st.Close()
	setRequestID(w, r, st.ID())
	switch p.stream {
	case streamWhole:
		s.speechWhole(w, r, st, p)
	default:
		s.speechStream(w, r, st, p)
	}
}

func contentType(format string) string {
	t, _ := encode.ContentType(format)
	return t
}

// encodes reports whether format is written by an encoder (mp3, opus,
// aac, flac) rather than here (wav, pcm).
func encodes(format string) bool { return format != formatWAV && format != formatPCM }

// encodeAll encodes a into format, whole.
func encodeAll(format string, a *engine.Audio) ([]byte, error) {
	return encode.Whole(format, a.SampleRate, a.Samples, encodeOptions(false))
}

// speechWhole answers with the whole audio file once the request ends,
// with its length, and the word timestamps in a header when they fit, on
// the file's timeline (moved by leadMs).
func (s *Server) speechWhole(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream, p *speechPlan) {
	outs, err := st.Collect(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var chunks []engine.Chunk
	var words []engine.Word
	for _, o := range outs {
		for _, c := range o.Chunks {
			if c.Words != nil {
				words = append(words, c.Words.Words...)
			} else if c.Audio != nil {
				chunks = append(chunks, c)
			}
		}
	}
	a, err := engine.JoinAudio(chunks)
	if err == nil && a == nil {
		err = errNoAudio
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var encoded []byte
	if encodes(p.format) {
		if encoded, err = encodeAll(p.format, a); err != nil {
			s.fail(w, r, fmt.Errorf("encoding %s: %w", p.format, err))
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", contentType(p.format))
	h.Set(headerSampleRate, strconv.Itoa(a.SampleRate))
	n := 2 * len(a.Samples)
	switch {
	case encoded != nil:
		n = len(encoded)
	case p.format == formatWAV:
		n += audio.WAVHeaderLen
	}
	if p.timestamps {
		words = shiftWords(words, leadMs(p.format, a.SampleRate, false))
		if stamps := headerJSON(words); len(stamps) <= MaxTimestampsHeader {
			h.Set(headerTimestamps, stamps)
		} else {
			h.Set(headerTimestampsOmitted, fmt.Sprintf("%d words make %d bytes, more than the %d a header may hold; use stream_format sse or POST /v1/generate", len(words), len(stamps), MaxTimestampsHeader))
		}
	}
	h.Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	body := s.newBodyWriter(w)
	defer body.Done()
	switch {
	case encoded != nil:
		_, err = body.Write(encoded)
	case p.format == formatWAV:
		err = audio.WriteWAV(body, a)
	default:
		err = writePCM(body, a.Samples)
	}
	if err != nil {
		s.streamFailed(r, err)
	}
}

// writePCM writes samples as 16-bit little-endian PCM, a block at a time.
func writePCM(w io.Writer, samples []int16) error {
	const block = 8192
	buf := make([]byte, 0, 2*min(block, len(samples)))
	for len(samples) > 0 {
		n := min(block, len(samples))
		buf = audio.AppendPCMBytes(buf[:0], samples[:n])
		if _, err := w.Write(buf); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}

// headerJSON returns words as compact JSON that is safe in an HTTP header:
// every non-ASCII character is escaped.
func headerJSON(words []engine.Word) string {
	if words == nil {
		words = []engine.Word{}
	}
	b, _ := json.Marshal(words)
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range string(b) {
		switch {
		case c < utf8.RuneSelf:
			sb.WriteRune(c)
		case c > 0xFFFF:
			c -= 0x10000
			fmt.Fprintf(&sb, `\u%04x\u%04x`, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		default:
			fmt.Fprintf(&sb, `\u%04x`, c)
		}
	}
	return sb.String()
}
