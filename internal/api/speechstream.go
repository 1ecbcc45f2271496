package api

// Streamed answers of POST /v1/audio/speech: chunked audio or server-sent
// events, of encoded or raw audio, as the pipeline produces it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httpbody"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/quote"
)

// speechStream sends the audio as it comes: chunked audio (a WAV header
// of unknown length first, for wav) or server-sent events. The headers
// wait for the first audio chunk, whose sample rate they state, so a
// request that fails before any audio gets a plain error status. A failure
// after that is logged and ends the stream: with an error event for SSE,
// with the X-Stream-Error trailer for chunked audio (a chunked body that
// ends cleanly is otherwise indistinguishable from a complete one).
func (s *Server) speechStream(w http.ResponseWriter, r *http.Request, st *orchestrator.Stream, p *speechPlan) {
	body := s.newBodyWriter(w)
	defer body.Done()
	ss := &streamedSpeech{s: s, w: w, r: r, p: p}
	if p.stream == streamSSE {
		ss.form = &sseForm{ev: &eventWriter{body: body, sse: true}}
	} else {
		ss.form = &chunkedForm{body: body, h: w.Header(), format: p.format}
	}
	defer func() { ss.enc.free() }() // after a failure: frees the encoder
	if err := ss.relay(r.Context(), st); err != nil {
		ss.fail(err)
	}
}

// streamedSpeech is a streamed speech answer while it is written.
type streamedSpeech struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	p    *speechPlan
	form streamForm
	// enc is nil until the first audio chunk started the answer.
	enc     *streamEncoder
	rate    int
	samples int
}

// sendError is a failure to write to the client: the answer just ends, as
// nothing more would reach the client.
type sendError struct{ err error }

func (e sendError) Error() string { return e.err.Error() }
func (e sendError) Unwrap() error { return e.err }

// relay sends each chunk of st as it comes, then ends the answer.
func (ss *streamedSpeech) relay(ctx context.Context, st *orchestrator.Stream) error {
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := ss.chunk(o.Chunk); err != nil {
			return err
		}
	}
	if ss.enc == nil {
		return errNoAudio
	}
	if err := ss.enc.close(); err != nil {
		return err
	}
	if err := ss.send(); err != nil {
		return err
	}
	return ss.form.done(st, ss.p, apijson.DurationMs(ss.samples, ss.rate))
}

// chunk sends one chunk: its audio, or its word timestamps (an aligner
// that streams sends one chunk per sentence).
func (ss *streamedSpeech) chunk(c engine.Chunk) error {
	switch {
	case c.Words != nil:
		return ss.form.words(c.Words.Words)
	case c.Audio == nil:
		return nil
	case ss.enc == nil:
		if err := ss.start(c.Audio.SampleRate); err != nil {
			return err
		}
	case c.Audio.SampleRate != ss.rate:
		return fmt.Errorf("audio chunks change sample rate from %d to %d Hz", ss.rate, c.Audio.SampleRate)
	}
	ss.samples += len(c.Audio.Samples)
	if err := ss.enc.write(c.Audio.Samples); err != nil {
		return err
	}
	return ss.send()
}

// start sends the answer's headers, which state the sample rate of the
// first audio chunk.
func (ss *streamedSpeech) start(rate int) error {
	enc, err := newStreamEncoder(ss.p.format, rate, ss.p.stream == streamAudio && ss.p.format == formatWAV)
	if err != nil {
		return err
	}
	h := ss.w.Header()
	h.Set(headerSampleRate, strconv.Itoa(rate))
	ss.form.start(h, leadMs(ss.p.format, rate, true))
	ss.w.WriteHeader(http.StatusOK)
	ss.enc, ss.rate = enc, rate
	return nil
}

// send sends the audio bytes the encoder has ready, if any.
func (ss *streamedSpeech) send() error {
	b := ss.enc.take()
	if len(b) == 0 {
		return nil
	}
	if err := ss.form.audio(b); err != nil {
		return sendError{err}
	}
	return nil
}

// fail ends the answer with err: a plain error status before the headers,
// else a logged failure and the form's in-band error; only logged when
// the client could not be written to.
func (ss *streamedSpeech) fail(err error) {
	var se sendError
	switch {
	case errors.As(err, &se):
		ss.s.streamFailed(ss.r, se.err)
	case ss.enc == nil:
		ss.s.fail(ss.w, ss.r, err)
	default:
		ss.s.streamFailed(ss.r, err)
		ss.form.fail(err)
	}
}

// streamForm is how a streamed speech answer carries its audio: chunked
// audio or server-sent events. Errors of the methods that write are the
// client's connection failing, as sendErrors.
type streamForm interface {
	// start sets the form's headers; the answer starts. Word timestamps
	// go out leadMs later than the aligner has them.
	start(h http.Header, leadMs int)
	// audio sends a piece of the audio.
	audio(b []byte) error
	// words takes a sentence's word timestamps.
	words(w []engine.Word) error
	// done ends an answer whose audio was all sent.
	done(st *orchestrator.Stream, p *speechPlan, durationMs int) error
	// fail ends a started answer with err, in band.
	fail(err error)
}

// chunkedForm is stream_format audio: the audio bytes as the body, chunk
// by chunk, and a failure in the X-Stream-Error trailer. It carries no
// timestamps (a request cannot ask for them).
type chunkedForm struct {
	body   *httpbody.Writer
	h      http.Header
	format string
}

func (f *chunkedForm) start(h http.Header, _ int) {
	h.Set("Content-Type", contentType(f.format))
	h.Set("Trailer", headerStreamError)
}

func (f *chunkedForm) audio(b []byte) error                              { return f.body.Send(b) }
func (f *chunkedForm) words([]engine.Word) error                         { return nil }
func (f *chunkedForm) done(*orchestrator.Stream, *speechPlan, int) error { return nil }

func (f *chunkedForm) fail(err error) {
	_, _, code := httperr.Classify(err)
	f.h.Set(headerStreamError, code+": "+quote.Short(err.Error()))
}

// sseForm is stream_format sse: a speech.audio.delta event per piece of
// audio, a speech.word_timestamps event per sentence as soon as the answer
// started (those before it are held to the end), then the timings and
// speech.audio.done; a failure is an error event. The timestamps are on
// the timeline of the audio the deltas make up, moved by leadMs.
type sseForm struct {
	ev      *eventWriter
	started bool
	leadMs  int
	held    []engine.Word // timestamps not sent yet
	sent    bool          // a timestamps event was sent
}

func (f *sseForm) start(h http.Header, leadMs int) {
	setEventHeaders(h, true)
	f.started, f.leadMs = true, leadMs
}

func (f *sseForm) audio(b []byte) error {
	return f.ev.send(apijson.SpeechEvent{Type: apijson.SpeechDelta, Audio: b})
}

func (f *sseForm) words(w []engine.Word) error {
	if !f.started {
		f.held = append(f.held, w...)
		return nil
	}
	if err := f.ev.send(apijson.SpeechEvent{Type: apijson.SpeechTimestamps, Words: shiftWords(w, f.leadMs)}); err != nil {
		return sendError{err}
	}
	f.sent = true
	return nil
}

func (f *sseForm) done(st *orchestrator.Stream, p *speechPlan, durationMs int) error {
	if p.timestamps && (!f.sent || len(f.held) > 0) {
		words := shiftWords(f.held, f.leadMs)
		if words == nil {
			words = []engine.Word{}
		}
		if err := f.ev.send(apijson.SpeechEvent{Type: apijson.SpeechTimestamps, Words: words}); err != nil {
			return sendError{err}
		}
	}
	if p.stages {
		if err := f.ev.send(apijson.SpeechEvent{Type: apijson.SpeechStages, Stages: stageTimings(st)}); err != nil {
			return sendError{err}
		}
	}
	err := f.ev.send(apijson.SpeechEvent{Type: apijson.SpeechDone, Usage: &apijson.SpeechUsage{
		InputTokens: p.chars, TotalTokens: p.chars, AudioDurationMs: durationMs,
	}})
	if err != nil {
		return sendError{err}
	}
	return nil
}

func (f *sseForm) fail(err error) {
	_ = f.ev.send(apijson.SpeechEvent{Type: apijson.SpeechError, Error: errorDetail(err)})
}

// streamEncoder turns a stream's samples into the bytes of its format as
// they come: through an encoder, as a stream (no Info tag in mp3), for
// the encoded formats (mp3, opus, aac, flac); as 16-bit little-endian PCM
// for wav and pcm, after a WAV header of unknown length when asked.
type streamEncoder struct {
	format  string
	enc     encode.Encoder // nil for wav and pcm, and once closed
	encoded bytes.Buffer   // what enc wrote
	raw     []byte         // PCM (or WAV) bytes, without an encoder
}

func newStreamEncoder(format string, rate int, wavHeader bool) (*streamEncoder, error) {
	e := &streamEncoder{format: format}
	switch {
	case encodes(format):
		enc, err := encode.New(format, &e.encoded, rate, encodeOptions(true))
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", format, err)
		}
		e.enc = enc
	case wavHeader:
		e.raw = audio.AppendWAVHeader(e.raw, rate, audio.UnknownSize)
	}
	return e, nil
}

// write adds samples to the bytes ready.
func (e *streamEncoder) write(samples []int16) error {
	if !encodes(e.format) {
		e.raw = audio.AppendPCMBytes(e.raw, samples)
		return nil
	}
	if err := e.enc.Write(samples); err != nil {
		return fmt.Errorf("encoding %s: %w", e.format, err)
	}
	return nil
}

// take returns the bytes ready and forgets them; they stay valid until the
// next write.
func (e *streamEncoder) take() []byte {
	out := e.raw
	if encodes(e.format) {
		out = e.encoded.Bytes()
	}
	e.raw = e.raw[:0]
	e.encoded.Reset()
	return out
}

// close ends the encoding, which readies the encoder's last bytes.
func (e *streamEncoder) close() error {
	if e.enc == nil {
		return nil
	}
	err := e.enc.Close()
	e.enc = nil
	if err != nil {
		return fmt.Errorf("encoding %s: %w", e.format, err)
	}
	return nil
}

// free releases the encoder of an answer that failed; e may be nil.
func (e *streamEncoder) free() {
	if e != nil && e.enc != nil {
		_ = e.enc.Close()
	}
}
