package api

// An utterance's relay: its request's outputs, as they come, cut into the
// units (sentences) whose audio goes out on its own, and handed to the
// form the session asked for: omnistage's (wssentences.go) or vLLM-Omni's
// audio.chunk events (wschunks.go).

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// relay submits u's request and sends what it makes until it ends, u is
// cancelled or a write fails; it returns why it stopped (nil: the request
// ended well and every event of it was sent). A request that fails ends
// with an error event, after audio.done (error true) for the sentence it
// cut short.
func (ss *wsSession) relay(u *utterance) error {
	c := u.cfg
	slots := c.pipeline.cfg.Deploy.MaxInflight
	release, ok := ss.s.opts.LiveShare.Take(c.pipeline.orch, slots)
	if !ok {
		return ss.relayFailed(u, nil, httperr.Errorf(http.StatusServiceUnavailable, string(orchestrator.CodeOverloaded),
			"live input holds its share of model %s's requests (%d of %d at once, serve --live-share): retry later", c.pipeline.name, ss.s.opts.LiveShare.Cap(slots), slots))
	}
	defer release()
	st, err := c.pipeline.orch.Submit(u.ctx, orchestrator.Request{Prompt: engine.Prompt{Feed: u.text.feed}, Input: u.text, Modalities: c.modalities(), Params: c.params})
	if err != nil {
		return ss.relayFailed(u, nil, err)
	}
	defer st.Close()
	_ = ss.out.note(u, func(s *sentAudio) { s.requestID = st.ID() })
	var out unitForm
	if c.chunks {
		out = &chunkSentences{ss: ss, u: u, requestID: st.ID()}
	} else {
		out = &sentences{ss: ss, u: u, requestID: st.ID()}
	}
	defer out.free()
	cut := &units{out: out, whole: c.split == splitNone}
	for {
		o, err := st.Recv(u.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ss.relayFailed(u, out, err)
		}
		if err := cut.chunk(o.Chunk); err != nil {
			return ss.relayFailed(u, out, err)
		}
	}
	if err := cut.end(); err != nil {
		return ss.relayFailed(u, out, err)
	}
	return nil
}

// relayFailed ends u's relay on err: nothing more to say if u was
// cancelled (or its session ended) or the client cannot be written to;
// else audio.done with error for the sentence cut short, and an error
// event.
func (ss *wsSession) relayFailed(u *utterance, out unitForm, err error) error {
	var se sendError
	switch {
	case errors.Is(err, errCancelled), errors.As(err, &se):
		return err
	case u.ctx.Err() != nil:
		return errCancelled
	}
	if out != nil {
		if werr := out.cutShort(); werr != nil {
			return werr
		}
	}
	ss.logFailure(u, err)
	if werr := ss.out.event(u, errorEvent(err, u.index)); werr != nil {
		return werr
	}
	return err
}

// unitForm is how the units of an utterance go out: their begin, their
// audio and their end, as units finds them, and the word timestamps.
type unitForm interface {
	// open begins a unit, of span (nil: the pipeline's audio carries no
	// spans), at rate Hz.
	open(span *engine.Span, rate int) error
	// write takes samples of the unit begun.
	write(samples []int16) error
	// close ends the unit begun.
	close() error
	// words takes word timestamps, on the utterance's timeline.
	words(words []engine.Word) error
	// end ends the utterance's audio: no unit begins after it.
	end() error
	// cutShort ends the unit the request's failure cut short, if any,
	// with audio.done (error true).
	cutShort() error
	// free frees the encoders still open, after a failure or a cancel.
	free()
}

// units cuts an utterance's outputs into the units whose audio goes out
// on its own: a sentence begins with the first audio of a span (or, from
// a pipeline whose audio carries no spans, the first audio after a
// sentence's end), and ends at its EndOfSentence mark, at the next span,
// or at the end of the audio; with whole (split_granularity none) the
// utterance is one unit.
type units struct {
	out   unitForm
	whole bool
	open  bool
	span  *engine.Span // the open unit's
	rate  int
}

// chunk handles one output chunk: audio or word timestamps.
func (c *units) chunk(ch engine.Chunk) error {
	switch {
	case ch.Words != nil:
		return c.out.words(ch.Words.Words)
	case ch.Audio == nil:
		return nil
	}
	a := ch.Audio
	if c.rate == 0 {
		c.rate = a.SampleRate
	} else if a.SampleRate != c.rate {
		return fmt.Errorf("audio chunks change sample rate from %d to %d Hz", c.rate, a.SampleRate)
	}
	if !c.whole && ch.Span != nil && c.open && (c.span == nil || ch.Span.Sentence != c.span.Sentence) {
		if err := c.close(); err != nil {
			return err
		}
	}
	if !c.open && (len(a.Samples) > 0 || ch.Span != nil) {
		span := ch.Span
		if c.whole {
			span = nil
		}
		if err := c.out.open(span, c.rate); err != nil {
			return err
		}
		c.open, c.span = true, span
	}
	if len(a.Samples) > 0 {
		if err := c.out.write(a.Samples); err != nil {
			return err
		}
	}
	if a.EndOfSentence && c.open && !c.whole {
		return c.close()
	}
	return nil
}

func (c *units) close() error {
	c.open = false
	return c.out.close()
}

// end ends the audio: the unit still open, if any, is complete.
func (c *units) end() error {
	if c.open {
		if err := c.close(); err != nil {
			return err
		}
	}
	return c.out.end()
}

// sentenceOf returns the sentence of spans that holds the word starting
// at code point at, or -1.
func sentenceOf(spans []engine.Span, at int) int {
	for _, s := range spans {
		if at >= s.Start && at < s.End {
			return s.Sentence
		}
	}
	return -1
}
