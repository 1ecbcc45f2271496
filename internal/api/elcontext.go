package api

// A context of an ElevenLabs streaming-input session: its text as it
// arrives (a streamed request of the pipeline, whose talker speaks each
// sentence as its end arrives, or at a flush), its audio in the session's
// output format, and the characters' alignment, made from the aligner's
// word timestamps.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// elContext is one context: its fields are the session loop's, but for
// what its relay alone touches.
type elContext struct {
	es        *elSession
	id        string
	text      *textQueue
	params    []json.RawMessage
	began     bool // text that is not blank came: the relay runs
	inputDone bool // close_context came
	ctx       context.Context
	cancel    context.CancelFunc
}

func newELContext(es *elSession, id string, params []json.RawMessage) *elContext {
	c := &elContext{es: es, id: id, text: newTextQueue(), params: params}
	c.ctx, c.cancel = context.WithCancel(es.ctx)
	return c
}

// add appends text; the first that is not blank starts the relay (the
// context's first message is " ").
func (c *elContext) add(text string) error {
	if !c.began && blank(text) {
		return nil
	}
	if c.inputDone {
		return httperr.BadRequest("context %q was closed: it takes no more text", c.id)
	}
	if n := c.text.size() + len(text); n > c.es.limits.MaxUtteranceText {
		return httperr.Errorf(http.StatusRequestEntityTooLarge, httperr.CodeInputTooLarge,
			"the context's text would be %d bytes, more than the limit of %d", n, c.es.limits.MaxUtteranceText)
	}
	c.text.add(text)
	if !c.began {
		c.began = true
		go c.relay()
	}
	return nil
}

// flush says the text so far ends a sentence: the talker speaks it all.
func (c *elContext) flush() {
	if c.began {
		c.text.brkSentence()
	}
}

// close ends the context's text: the rest is spoken, then isFinal.
func (c *elContext) close() {
	if c.inputDone {
		return
	}
	c.inputDone = true
	c.text.close()
	if !c.began {
		c.began = true
		go func() {
			c.final()
			c.es.ended <- c
		}()
	}
}

// final sends the context's isFinal.
func (c *elContext) final() {
	yes := true
	_ = c.es.out.event(nil, elOut{IsFinal: &yes, ContextID: c.es.idOf(c.id)})
}

// relay speaks the context's text, then sends isFinal; a failure is an
// error message of the context instead.
func (c *elContext) relay() {
	defer func() { c.es.ended <- c }()
	defer c.cancel()
	var se sendError
	switch err := c.speak(); {
	case err == nil:
		c.final()
	case c.ctx.Err() != nil, errors.As(err, &se):
	default:
		c.es.s.logFailureEL(err)
		c.es.fail(c.es.idOf(c.id), err)
	}
}

// speak submits the context's request and sends its audio, and its
// alignment as the aligner times the words.
func (c *elContext) speak() error {
	es, t := c.es, c.es.t
	share, slots := es.s.opts.LiveShare, t.pipeline.cfg.Deploy.MaxInflight
	release, ok := share.Take(t.pipeline.orch, slots)
	if !ok {
		return httperr.Errorf(http.StatusServiceUnavailable, string(orchestrator.CodeOverloaded),
			"live input holds its share of model %s's requests (%d of %d at once, serve --live-share): retry later", t.pipeline.name, share.Cap(slots), slots)
	}
	defer release()
	mods := []string{string(engine.KindAudio)}
	if t.stamps && es.q.syncAlignment {
		mods = append(mods, string(engine.KindTimestamps))
	}
	st, err := t.pipeline.orch.Submit(c.ctx, orchestrator.Request{Prompt: engine.Prompt{Feed: c.text.feed}, Input: c.text, Modalities: mods, Params: c.params})
	if err != nil {
		return err
	}
	defer st.Close()
	var enc *elEncoder
	defer func() { enc.free() }()
	al := &elAligner{text: c.text, leadMs: t.format.leadMs()}
	for {
		o, err := st.Recv(c.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		ch := o.Chunk
		switch {
		case ch.Words != nil:
			if a := al.words(ch.Words.Words); a != nil {
				if err := c.send(elOut{Alignment: a, NormalizedAlignment: a}); err != nil {
					return err
				}
			}
		case ch.Audio != nil:
			if ch.Span != nil {
				al.spans = append(al.spans, *ch.Span)
			}
			if enc == nil {
				if enc, err = newELEncoder(t.format, ch.Audio.SampleRate); err != nil {
					return err
				}
			}
			if err := c.sendAudio(enc.write(ch.Audio.Samples)); err != nil {
				return err
			}
		}
	}
	if enc == nil {
		return nil
	}
	return c.sendAudio(enc.close())
}

// sendAudio sends audio bytes, if any.
func (c *elContext) sendAudio(b []byte, err error) error {
	if err != nil || len(b) == 0 {
		return err
	}
	return c.send(elOut{Audio: &b})
}

// send sends a message of the context.
func (c *elContext) send(m elOut) error {
	m.ContextID = c.es.idOf(c.id)
	return c.es.out.event(nil, m)
}

// elAligner turns the aligner's word timestamps into ElevenLabs'
// character alignment: each character of a word gets an even share of the
// word's time, each other character (white space, punctuation) the time
// at the end of the word before it, with no duration. The characters go
// out once, in order, up to the end of the last word timed, or of its
// sentence when that word is the sentence's last: so the client, joining
// them, has the text as sent.
type elAligner struct {
	text   *textQueue
	leadMs int // the format's: a player plays the audio that much later
	spans  []engine.Span
	at     int // code points aligned so far
	atMs   int // the end of the last word aligned
}

// words returns the alignment of the text up to words' end, or nil when
// they add nothing.
func (a *elAligner) words(words []engine.Word) *elAlignment {
	for len(words) > 0 && words[0].CharStart < a.at {
		words = words[1:]
	}
	if len(words) == 0 {
		return nil
	}
	last := words[len(words)-1]
	end := last.CharEnd
	for _, s := range a.spans {
		if last.CharStart >= s.Start && last.CharStart < s.End {
			// A word entry leaves out the punctuation around it.
			sentence := a.text.slice(s.Start, s.End)
			body := strings.TrimRightFunc(sentence, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) })
			if last.CharEnd >= s.Start+utf8.RuneCountInString(body) {
				end = max(end, s.End)
			}
		}
	}
	al := &elAlignment{}
	i := a.at
	for _, r := range a.text.slice(a.at, end) {
		for len(words) > 0 && words[0].CharEnd <= i {
			a.atMs, words = words[0].EndMs+a.leadMs, words[1:]
		}
		start, dur := a.atMs, 0
		if len(words) > 0 && words[0].CharStart <= i {
			w := words[0]
			n, k, d := w.CharEnd-w.CharStart, i-w.CharStart, w.EndMs-w.StartMs
			start, dur = w.StartMs+a.leadMs+d*k/n, d*(k+1)/n-d*k/n
		}
		al.Chars = append(al.Chars, string(r))
		al.CharStartTimesMs = append(al.CharStartTimesMs, start)
		al.CharDurationsMs = append(al.CharDurationsMs, dur)
		i++
	}
	for _, w := range words {
		if w.CharEnd <= end {
			a.atMs = w.EndMs + a.leadMs
		}
	}
	a.at = end
	return al
}

// logFailureEL logs a context that failed, at warn when it is the
// server's fault.
func (s *Server) logFailureEL(err error) {
	if !isClientError(err) {
		s.log.Warn("elevenlabs: a context failed", "err", err)
	}
}
