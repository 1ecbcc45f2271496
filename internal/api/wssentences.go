package api

// omnistage's form of an utterance's units: a sentence's audio.start, its
// audio in binary messages, its audio.done, and word_timestamps events.

import (
	"bytes"
	"fmt"
	"math"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
)

// sentences sends an utterance's units in omnistage's form. In pcm, wav,
// opus and flac each sentence's audio is a file of its own; in mp3 and
// aac the utterance's is one stream (utteranceWide), whose encoder holds
// back a sentence's last frames until more samples push them out: so a
// sentence's audio.done waits for the next sentence's first audio or the
// utterance's end, when the encoder's last bytes go out as the last
// sentence's.
type sentences struct {
	ss        *wsSession
	u         *utterance
	requestID string
	rate      int
	n         int       // sentences begun
	cur       *sentence // the sentence whose audio is coming
	held      *sentence // utteranceWide: the last sentence ended, its audio.done held
	// stream is the utterance's encoder (utteranceWide), from its first
	// sentence on, and fed its samples.
	stream *streamEncoder
	fed    int64
	leadMs int // how much later than the aligner has them a player plays the words
}

// sentence is one sentence's audio on its way out, in the session's format.
type sentence struct {
	index int
	span  *engine.Span
	enc   encode.Encoder // pcm, wav, opus, flac with stream_audio; nil once closed
	buf   bytes.Buffer   // what enc wrote and is not sent yet
	whole []int16        // without stream_audio: the samples, sent at the end
	bytes int64          // bytes sent
	fed   int            // samples fed, with stream_audio
	told  int            // samples counted as sent
}

var _ unitForm = (*sentences)(nil)

// open begins a sentence: its audio.start.
func (sp *sentences) open(span *engine.Span, rate int) error {
	if err := sp.release(); err != nil {
		return err
	}
	u, cfg := sp.u, sp.u.cfg
	sp.rate = rate
	s := &sentence{index: sp.n, span: span}
	text := ""
	switch {
	case span != nil:
		s.index = span.Sentence
		text = u.text.slice(span.Start, span.End)
	case cfg.split == splitNone:
		text = u.text.slice(0, math.MaxInt) // the whole text, which came before the request
	}
	switch {
	case utteranceWide(cfg.format) && sp.stream == nil:
		enc, err := newStreamEncoder(cfg.format, rate, false)
		if err != nil {
			return err
		}
		sp.stream, sp.leadMs = enc, leadMs(cfg.format, rate, true)
	case !utteranceWide(cfg.format) && cfg.stream:
		enc, err := encode.New(cfg.format, &s.buf, rate, encode.Options{Stream: true})
		if err != nil {
			return fmt.Errorf("encoding %s: %w", cfg.format, err)
		}
		s.enc = enc
	}
	sp.n++
	sp.cur = s
	err := sp.ss.out.note(u, func(st *sentAudio) {
		st.rate, st.current, st.leadMs = rate, s.index, sp.leadMs
		st.sentences++
		if span != nil {
			st.spans = append(st.spans, *span)
		}
	})
	if err != nil {
		return err
	}
	return sp.ss.out.event(u, wsAudioStart{Type: evAudioStart, UtteranceIndex: u.index, SentenceIndex: s.index,
		SentenceText: text, Format: cfg.format, SampleRate: rate, Channels: 1, RequestID: sp.requestID})
}

// write takes samples of the current sentence: sent at once (as much as
// the encoder has ready) with stream_audio, else kept for its end.
func (sp *sentences) write(samples []int16) error {
	s, cfg := sp.cur, sp.u.cfg
	switch {
	case !cfg.stream:
		s.whole = append(s.whole, samples...)
		return nil
	case sp.stream != nil:
		return sp.feedStream(samples)
	}
	if err := s.enc.Write(samples); err != nil {
		return fmt.Errorf("encoding %s: %w", cfg.format, err)
	}
	s.fed += len(samples)
	return sp.flush(false)
}

// feedStream feeds the utterance's encoder and sends what it has ready as
// the current sentence's audio. Its samples count as sent once the
// encoder is closed (end): until then, what the bytes cover is not known.
func (sp *sentences) feedStream(samples []int16) error {
	if err := sp.stream.write(samples); err != nil {
		return err
	}
	sp.fed += int64(len(samples))
	return sp.send(sp.cur, sp.stream.take(), 0)
}

// send sends b, audio of s covering samples more samples.
func (sp *sentences) send(s *sentence, b []byte, samples int) error {
	if len(b) == 0 {
		return nil
	}
	if err := sp.ss.out.audio(sp.u, b, samples); err != nil {
		return err
	}
	s.bytes += int64(len(b))
	return nil
}

// flush sends what the sentence's encoder has ready: for pcm and wav, the
// samples just fed, which those bytes hold; for the other formats their
// samples count once the sentence is all sent (last).
func (sp *sentences) flush(last bool) error {
	s := sp.cur
	covered := 0
	switch f := sp.u.cfg.format; {
	case last:
		covered = s.fed - s.told
	case f == encode.PCM || f == encode.WAV:
		covered = s.fed - s.told
	}
	if err := sp.send(s, s.buf.Bytes(), covered); err != nil {
		return err
	}
	s.told += covered
	s.buf.Reset()
	return nil
}

// close ends the current sentence: the rest of its audio, then its
// audio.done (held, for utteranceWide, until the next sentence's audio
// or the end).
func (sp *sentences) close() error {
	s, u := sp.cur, sp.u
	switch {
	case sp.stream != nil:
		if len(s.whole) > 0 {
			if err := sp.feedStream(s.whole); err != nil {
				return err
			}
		}
		sp.cur, sp.held = nil, s
		return nil
	case s.enc != nil:
		err := s.enc.Close()
		s.enc = nil
		if err != nil {
			return fmt.Errorf("encoding %s: %w", u.cfg.format, err)
		}
		if err := sp.flush(true); err != nil {
			return err
		}
	case len(s.whole) > 0:
		b, err := wholeFile(u.cfg.format, sp.rate, s.whole)
		if err != nil {
			return err
		}
		if err := sp.send(s, b, len(s.whole)); err != nil {
			return err
		}
	}
	sp.cur = nil
	return sp.done(s, false)
}

// done sends s's audio.done, the text of its span heard.
func (sp *sentences) done(s *sentence, failed bool) error {
	return sentenceDone(sp.ss, sp.u, s.index, s.span, s.bytes, failed)
}

// sentenceDone sends the audio.done of u's sentence index, of span, which
// sent bytes of audio, and notes the text it covered heard unless it
// failed (with no span, the whole text when u is not split).
func sentenceDone(ss *wsSession, u *utterance, index int, span *engine.Span, bytes int64, failed bool) error {
	err := ss.out.note(u, func(st *sentAudio) {
		switch {
		case failed:
		case span != nil:
			st.heardEnd = max(st.heardEnd, span.End)
		case u.cfg.split == splitNone:
			st.heardEnd = u.text.cpLen()
		}
	})
	if err != nil {
		return err
	}
	return ss.out.event(u, wsAudioDone{Type: evAudioDone, UtteranceIndex: u.index, SentenceIndex: index, TotalBytes: bytes, Error: failed})
}

// release sends the held sentence's audio.done, if any.
func (sp *sentences) release() error {
	s := sp.held
	if s == nil {
		return nil
	}
	sp.held = nil
	return sp.done(s, false)
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

// end ends the utterance's audio: the utterance's encoder gives its last
// bytes, which go out as the last sentence's, with all its samples.
func (sp *sentences) end() error {
	if sp.stream == nil {
		return nil
	}
	if err := sp.stream.close(); err != nil {
		return err
	}
	if sp.held != nil {
		if err := sp.send(sp.held, sp.stream.take(), int(sp.fed)); err != nil {
			return err
		}
	}
	return sp.release()
}

// cutShort ends the sentence a failure cut short with audio.done (error
// true): the one whose audio was coming, else the one held.
func (sp *sentences) cutShort() error {
	sp.free()
	s := sp.cur
	if s == nil {
		s = sp.held
	}
	sp.cur, sp.held = nil, nil
	if s == nil {
		return nil
	}
	return sp.done(s, true)
}

// free frees the encoders still open.
func (sp *sentences) free() {
	sp.stream.free()
	if s := sp.cur; s != nil && s.enc != nil {
		_ = s.enc.Close()
		s.enc = nil
	}
}

// words sends word timestamps, one event per sentence they belong to: the
// sentence whose span holds a word's start (without spans, the sentence
// whose audio began last), moved by the format's lead.
func (sp *sentences) words(words []engine.Word) error {
	u := sp.u
	var spans []engine.Span
	_ = sp.ss.out.note(u, func(st *sentAudio) {
		st.words = append(st.words, words...)
		spans = st.spans
	})
	for len(words) > 0 {
		sent := sentenceOf(spans, words[0].CharStart)
		n := len(words)
		if sent < 0 {
			sent = max(sp.n-1, 0)
		} else {
			n = 1
			for n < len(words) && sentenceOf(spans, words[n].CharStart) == sent {
				n++
			}
		}
		ev := wsWords{Type: evWords, UtteranceIndex: u.index, SentenceIndex: sent, Words: shiftWords(words[:n], sp.leadMs)}
		if err := sp.ss.out.event(u, ev); err != nil {
			return err
		}
		words = words[n:]
	}
	return nil
}
