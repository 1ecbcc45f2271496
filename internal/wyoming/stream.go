package wyoming

// The streaming form of a synthesis: synthesize-start, its text in
// synthesize-chunk pieces that go to the talker as they come (a streamed
// request), each sentence's audio an audio stream of its own as the
// talker speaks it, and synthesize-stopped once the last is sent.

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// stream is a stream under way. Its request is submitted with its first
// piece that is not blank (text before it is sent with it), so that a
// stream with nothing to say asks nothing of the pipeline; from then on
// a goroutine relays its audio while the session reads its pieces.
type stream struct {
	ss     *session
	target *target
	req    orchestrator.Request
	n      int    // bytes of text so far
	blank  string // the text before the first piece that is not blank
	// quietAt is when the text, ending in a full stop, has waited long
	// enough for a next piece: its sentence is then spoken (zero: not
	// ending in one, or said already).
	quietAt time.Time
	// limitAt is when the stream reaches MaxStream.
	limitAt time.Time

	pieces chan engine.Chunk  // the request's input, once submitted
	cancel context.CancelFunc // ends the request
	// release gives back the stream's place in its pipeline's share of
	// live input, once submitted.
	release func()
	done    chan struct{} // closed when the relay has ended
	err     error         // the relay's outcome, set before done closes
}

// startStream opens a stream.
func (ss *session) startStream(ev event) error {
	if ss.stream != nil {
		return unexpected("synthesize-start while a stream is under way: send synthesize-stop first")
	}
	d, err := parseSynthesize(ev, false)
	if err != nil {
		return err
	}
	t, voice, err := ss.srv.cat.resolve(d.Voice)
	if err != nil {
		ss.srv.m.syntheses.WithLabelValues(formStream, "failed").Inc()
		return ss.fail(CodeUnknownVoice, "%v", err)
	}
	req, err := t.request(voice)
	if err != nil {
		return ss.failSynthesis(formStream, err)
	}
	ss.stream = &stream{ss: ss, target: t, req: req, limitAt: time.Now().Add(ss.srv.opts.MaxStream)}
	return nil
}

// streamChunk hands a piece of text to the stream's talker; it waits
// while the talker has TextBuffer pieces it has not read.
func (ss *session) streamChunk(ev event) error {
	st := ss.stream
	if st == nil {
		return unexpected("synthesize-chunk outside a stream: send synthesize-start first")
	}
	text, err := parseChunk(ev)
	if err != nil {
		return err
	}
	if st.failed() {
		return st.end()
	}
	// The runtime holds a stream's text so far (the aligner's transcript),
	// so its whole length is bounded.
	if st.n += len(text); st.n > ss.srv.opts.MaxTextBytes {
		st.abandon()
		ss.stream = nil
		ss.srv.m.syntheses.WithLabelValues(formStream, "failed").Inc()
		return ss.fail(CodeTextTooLong, "synthesize-chunk event: the stream's text reaches %d bytes, over the limit of %d", st.n, ss.srv.opts.MaxTextBytes)
	}
	if st.pieces == nil {
		if strings.TrimSpace(text) == "" {
			st.blank += text
			return nil
		}
		if err := st.submit(); err != nil {
			ss.stream = nil
			return err
		}
		text, st.blank = st.blank+text, ""
	}
	if stop, known := engine.EndsInStop(text); known {
		st.quietAt = time.Time{}
		if q := ss.srv.opts.SentenceQuiet; stop && q > 0 {
			st.quietAt = time.Now().Add(q)
		}
	}
	return st.send(engine.Chunk{Text: &engine.Text{Text: text}})
}

// send hands a chunk to the stream's talker, waiting while it has
// TextBuffer pieces it has not read.
func (st *stream) send(c engine.Chunk) error {
	select {
	case st.pieces <- c:
		return nil
	case <-st.done:
		return st.end()
	}
}

// quiet says the stream's sentence has ended (engine.Text.Break), when
// its text has ended in a full stop for the quiet time: the session calls
// it when a read times out.
func (st *stream) quiet() (bool, error) {
	if st.quietAt.IsZero() || time.Now().Before(st.quietAt) {
		return false, nil
	}
	st.quietAt = time.Time{}
	return true, st.send(engine.Chunk{Text: &engine.Text{Break: true}})
}

// stopStream ends the stream's text, waits for its last audio to be sent,
// and answers synthesize-stopped.
func (ss *session) stopStream() error {
	st := ss.stream
	if st == nil {
		return unexpected("synthesize-stop outside a stream: send synthesize-start first")
	}
	ss.stream = nil
	if st.pieces == nil {
		ss.srv.m.syntheses.WithLabelValues(formStream, "ok").Inc()
	} else {
		close(st.pieces)
		<-st.done
		if st.err != nil {
			return st.end()
		}
	}
	return ss.w.write(typeSynthesizeStopped, nil, nil, true)
}

// submit submits the stream's request and starts relaying its audio.
func (st *stream) submit() error {
	ss := st.ss
	ctx, cancel := context.WithCancel(ss.ctx)
	pieces := make(chan engine.Chunk, ss.srv.opts.TextBuffer)
	st.req.Input = engine.ChanSource(pieces)
	share, slots := ss.srv.opts.LiveShare, st.target.orch.Config().Deploy.MaxInflight
	release, ok := share.Take(st.target.orch, slots)
	if !ok {
		cancel()
		return ss.failSynthesis(formStream, httperr.Errorf(http.StatusServiceUnavailable, string(orchestrator.CodeOverloaded),
			"streams hold their share of pipeline %s's requests (%d of %d at once, serve --live-share): retry later", st.target.name, share.Cap(slots), slots))
	}
	out, err := st.target.orch.Submit(ctx, st.req)
	if err != nil {
		release()
		cancel()
		return ss.failSynthesis(formStream, err)
	}
	st.pieces, st.cancel, st.done, st.release = pieces, cancel, make(chan struct{}), release
	ss.log.Debug("wyoming synthesis", "request_id", out.ID(), "pipeline", st.target.name, "form", formStream)
	go st.relay(ctx, out)
	return nil
}

// relay sends the stream's audio to its end. When it fails, it ends the
// synthesis as failSynthesis does, from its own goroutine: the error
// event (when the client can take one), then a wake for the session,
// which sees the failure (stopReading) and ends.
func (st *stream) relay(ctx context.Context, out *orchestrator.Stream) {
	ss := st.ss
	err := st.speak(ctx, out)
	st.release()
	switch {
	case err == nil:
		ss.srv.m.syntheses.WithLabelValues(formStream, "ok").Inc()
	case ctx.Err() != nil && ss.ctx.Err() == nil:
		// Abandoned by the session, which says why.
		ss.srv.m.syntheses.WithLabelValues(formStream, "cancelled").Inc()
		st.err = errFailed
	default:
		st.err = ss.failSynthesis(formStream, err)
	}
	close(st.done)
	if st.err != nil {
		ss.wake()
	}
}

// speak relays out's audio, each sentence an audio stream.
func (st *stream) speak(ctx context.Context, out *orchestrator.Stream) error {
	defer out.Close()
	sp := st.ss.newSpeech(true)
	if err := sp.relay(ctx, out); err != nil {
		return err
	}
	if err := sp.finish(); err != nil {
		return &writeError{err}
	}
	return nil
}

// failed reports whether the relay has ended with an error.
func (st *stream) failed() bool {
	if st.done == nil {
		return false
	}
	select {
	case <-st.done:
		return st.err != nil
	default:
		return false
	}
}

// end is the session's end for a stream whose relay has ended: the
// relay's error (errFailed when it told the client), or nil.
func (st *stream) end() error {
	<-st.done
	return st.err
}

// abandon stops the stream's request and waits for its relay to end.
func (st *stream) abandon() {
	if st.done == nil {
		return
	}
	st.cancel()
	<-st.done
}
