package api

// An utterance's relay: its request's outputs, as they come, turned into
// the session's events: a sentence's audio.start, its audio, its
// audio.done, and word_timestamps.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
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
	sp := &sentences{ss: ss, u: u, requestID: st.ID()}
	for {
		o, err := st.Recv(u.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ss.relayFailed(u, sp, err)
		}
		if err := sp.chunk(o.Chunk); err != nil {
			return ss.relayFailed(u, sp, err)
		}
	}
	if err := sp.end(); err != nil {
		return ss.relayFailed(u, sp, err)
	}
	return nil
}

// relayFailed ends u's relay on err: nothing more to say if u was
// cancelled (or its session ended) or the client cannot be written to;
// else audio.done with error for the sentence cut short, and an error
// event.
func (ss *wsSession) relayFailed(u *utterance, sp *sentences, err error) error {
	var se sendError
	switch {
	case errors.Is(err, errCancelled), errors.As(err, &se):
		return err
	case u.ctx.Err() != nil:
		return errCancelled
	}
	if sp != nil && sp.cur != nil {
		_ = ss.out.event(u, wsAudioDone{Type: evAudioDone, UtteranceIndex: u.index, SentenceIndex: sp.cur.index, TotalBytes: sp.cur.bytes, Error: true})
	}
	ss.logFailure(u, err)
	if werr := ss.out.event(u, errorEvent(err, u.index)); werr != nil {
		return werr
	}
	return err
}

// sentences turns one utterance's outputs into sentences: each begins with
// the first audio of a span (or, from a pipeline whose audio carries no
// spans, the first audio after a sentence's end), and ends at its
// EndOfSentence mark, at the next span, or at the end of the audio.
type sentences struct {
	ss        *wsSession
	u         *utterance
	requestID string
	cur       *sentence // the sentence whose audio is going out
	n         int       // sentences begun
	rate      int
}

// sentence is one sentence's audio on its way out, in the session's format.
type sentence struct {
	index int
	span  *engine.Span
	enc   encode.Encoder // with stream_audio; nil once closed
	buf   bytes.Buffer   // what enc wrote and is not sent yet
	whole []int16        // without stream_audio: the samples, sent at the end
	bytes int64          // bytes sent
	fed   int            // samples fed, with stream_audio
	told  int            // samples counted as sent
}

// chunk handles one output chunk: audio or word timestamps.
func (sp *sentences) chunk(c engine.Chunk) error {
	switch {
	case c.Words != nil:
		return sp.words(c.Words.Words)
	case c.Audio == nil:
		return nil
	}
	a := c.Audio
	if sp.rate == 0 {
		sp.rate = a.SampleRate
	} else if a.SampleRate != sp.rate {
		return fmt.Errorf("audio chunks change sample rate from %d to %d Hz", sp.rate, a.SampleRate)
	}
	if c.Span != nil && sp.cur != nil && (sp.cur.span == nil || c.Span.Sentence != sp.cur.span.Sentence) {
		if err := sp.close(); err != nil {
			return err
		}
	}
	if sp.cur == nil && (len(a.Samples) > 0 || c.Span != nil) {
		if err := sp.open(c.Span); err != nil {
			return err
		}
	}
	if len(a.Samples) > 0 {
		if err := sp.write(a.Samples); err != nil {
			return err
		}
	}
	if a.EndOfSentence && sp.cur != nil {
		return sp.close()
	}
	return nil
}

// open begins a sentence: its audio.start.
func (sp *sentences) open(span *engine.Span) error {
	u, cfg := sp.u, sp.u.cfg
	s := &sentence{index: sp.n, span: span}
	text := ""
	if span != nil {
		s.index = span.Sentence
		text = u.text.slice(span.Start, span.End)
	}
	if cfg.stream {
		enc, err := encode.New(cfg.format, &s.buf, sp.rate, encode.Options{Stream: true})
		if err != nil {
			return fmt.Errorf("encoding %s: %w", cfg.format, err)
		}
		s.enc = enc
	}
	sp.n++
	sp.cur = s
	err := sp.ss.out.note(u, func(st *sentAudio) {
		st.rate, st.current = sp.rate, s.index
		st.sentences++
		if span != nil {
			st.spans = append(st.spans, *span)
		}
	})
	if err != nil {
		return err
	}
	return sp.ss.out.event(u, wsAudioStart{Type: evAudioStart, UtteranceIndex: u.index, SentenceIndex: s.index,
		SentenceText: text, Format: cfg.format, SampleRate: sp.rate, Channels: 1, RequestID: sp.requestID})
}

// write takes samples of the current sentence: sent at once (as much as
// the encoder has ready) with stream_audio, else kept for its end.
func (sp *sentences) write(samples []int16) error {
	s := sp.cur
	if s.enc == nil {
		s.whole = append(s.whole, samples...)
		return nil
	}
	if err := s.enc.Write(samples); err != nil {
		return fmt.Errorf("encoding %s: %w", sp.u.cfg.format, err)
	}
	s.fed += len(samples)
	return sp.flush(false)
}

// flush sends what the encoder has ready: for pcm and wav, the samples
// just fed, which those bytes hold; for the other formats their samples
// count once the sentence is all sent (last).
func (sp *sentences) flush(last bool) error {
	s := sp.cur
	if s.buf.Len() == 0 {
		return nil
	}
	covered := 0
	switch f := sp.u.cfg.format; {
	case last:
		covered = s.fed - s.told
	case f == encode.PCM || f == encode.WAV:
		covered = s.fed - s.told
	}
	if err := sp.ss.out.audio(sp.u, s.buf.Bytes(), covered); err != nil {
		return err
	}
	s.bytes += int64(s.buf.Len())
	s.told += covered
	s.buf.Reset()
	return nil
}

// close ends the current sentence: the rest of its audio, then its
// audio.done.
func (sp *sentences) close() error {
	s, u := sp.cur, sp.u
	if s.enc != nil {
		err := s.enc.Close()
		s.enc = nil
		if err != nil {
			return fmt.Errorf("encoding %s: %w", u.cfg.format, err)
		}
		if err := sp.flush(true); err != nil {
			return err
		}
	} else if len(s.whole) > 0 {
		b, err := wholeFile(u.cfg.format, sp.rate, s.whole)
		if err != nil {
			return err
		}
		if err := sp.ss.out.audio(u, b, len(s.whole)); err != nil {
			return err
		}
		s.bytes += int64(len(b))
	}
	sp.cur = nil
	err := sp.ss.out.note(u, func(st *sentAudio) {
		if s.span != nil {
			st.heardEnd = max(st.heardEnd, s.span.End)
		}
	})
	if err != nil {
		return err
	}
	return sp.ss.out.event(u, wsAudioDone{Type: evAudioDone, UtteranceIndex: u.index, SentenceIndex: s.index, TotalBytes: s.bytes})
}

// wholeFile is samples as one file of format.
func wholeFile(format string, rate int, samples []int16) ([]byte, error) {
	if format == encode.PCM {
		return audio.AppendPCMBytes(nil, samples), nil
	}
	b, err := encode.Whole(format, rate, samples, encode.Options{})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", format, err)
	}
	return b, nil
}

// end ends the audio: the sentence still open, if any, is complete.
func (sp *sentences) end() error {
	if sp.cur != nil {
		return sp.close()
	}
	return nil
}

// words sends word timestamps, one event per sentence they belong to: the
// sentence whose span holds a word's start (without spans, the sentence
// whose audio began last).
func (sp *sentences) words(words []engine.Word) error {
	u := sp.u
	var spans []engine.Span
	_ = sp.ss.out.note(u, func(st *sentAudio) {
		st.words = append(st.words, words...)
		spans = st.spans
	})
	for len(words) > 0 {
		sent, n := sp.sentenceOf(spans, words)
		ev := wsWords{Type: evWords, UtteranceIndex: u.index, SentenceIndex: sent, Words: words[:n]}
		if err := sp.ss.out.event(u, ev); err != nil {
			return err
		}
		words = words[n:]
	}
	return nil
}

// sentenceOf returns the sentence of words[0] and how many of the words
// that follow it are of the same sentence.
func (sp *sentences) sentenceOf(spans []engine.Span, words []engine.Word) (sentence, n int) {
	find := func(w engine.Word) int {
		for _, s := range spans {
			if w.CharStart >= s.Start && w.CharStart < s.End {
				return s.Sentence
			}
		}
		return -1
	}
	sentence = find(words[0])
	if sentence < 0 {
		return max(sp.n-1, 0), len(words)
	}
	n = 1
	for n < len(words) && find(words[n]) == sentence {
		n++
	}
	return sentence, n
}
