package api

// vLLM-Omni's form of an utterance's units, for a session that asks for
// its timestamps so (word_timestamps_form audio.chunk): a sentence's
// audio in audio.chunk events, then its word timestamps, from its own
// start, in an audio.chunk of no audio, then its audio.done, one sentence
// after the other.

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

// chunkSentences sends an utterance's units in vLLM-Omni's form. A
// sentence's audio.done waits for its words: those reaching its last
// word, or a word of a later sentence, or the end of the request. The
// sentences after it wait meanwhile, their audio held (the aligner runs
// as soon as a sentence's audio is complete, so the wait is short).
type chunkSentences struct {
	ss        *wsSession
	u         *utterance
	requestID string
	rate      int
	n         int              // sentences begun
	samples   int64            // of the utterance so far
	queue     []*chunkSentence // begun and not done, in order: the head goes out live
	spans     []engine.Span
	ended     bool // the request's outputs have all come
}

// chunkSentence is one sentence on its way out.
type chunkSentence struct {
	index    int
	span     *engine.Span
	text     string
	start    int64   // samples of the utterance before it
	samples  int64   // its own, so far
	held     []int16 // not sent yet: it is not the head
	chunks   int     // audio.chunk events sent
	bytes    int64
	started  bool // its audio.start was sent
	closed   bool // its audio is all here
	words    []engine.Word
	lastChar int  // code point end of its text's last word, or -1 (a word beyond is no word: the next sentence's or the end decide)
	complete bool // its words are all here
}

var _ unitForm = (*chunkSentences)(nil)

func (cs *chunkSentences) open(span *engine.Span, rate int) error {
	u := cs.u
	cs.rate = rate
	s := &chunkSentence{index: cs.n, span: span, start: cs.samples, lastChar: -1}
	switch {
	case span != nil:
		s.index, s.text = span.Sentence, u.text.slice(span.Start, span.End)
		// A word's entry leaves out the punctuation around it.
		s.lastChar = span.Start + utf8.RuneCountInString(strings.TrimRightFunc(s.text, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }))
		cs.spans = append(cs.spans, *span)
	case u.cfg.split == splitNone:
		s.text = u.text.slice(0, math.MaxInt)
	}
	cs.n++
	cs.queue = append(cs.queue, s)
	err := cs.ss.out.note(u, func(st *sentAudio) {
		st.rate = rate
		st.sentences++
		if span != nil {
			st.spans = append(st.spans, *span)
		}
	})
	if err != nil {
		return err
	}
	return cs.advance()
}

func (cs *chunkSentences) write(samples []int16) error {
	s := cs.queue[len(cs.queue)-1]
	cs.samples += int64(len(samples))
	if !s.started {
		s.held = append(s.held, samples...)
		return nil
	}
	return cs.send(s, samples)
}

// send sends samples of s, its head, in an audio.chunk.
func (cs *chunkSentences) send(s *chunkSentence, samples []int16) error {
	b := audio.AppendPCMBytes(make([]byte, 0, 2*len(samples)), samples)
	ev := wsAudioChunk{Type: evAudioChunk, UtteranceIndex: cs.u.index, SentenceIndex: s.index, ChunkID: s.chunks,
		ChunkStartMs: cs.ms(s.samples), ChunkEndMs: cs.ms(s.samples + int64(len(samples))),
		SampleRate: cs.rate, Channels: 1, AudioB64: b}
	if err := cs.ss.out.audioEvent(cs.u, ev, len(b), len(samples)); err != nil {
		return err
	}
	s.chunks++
	s.samples += int64(len(samples))
	s.bytes += int64(len(b))
	return nil
}

// ms is n samples in milliseconds, rounded.
func (cs *chunkSentences) ms(n int64) int {
	return int((n*1000 + int64(cs.rate)/2) / int64(cs.rate))
}

func (cs *chunkSentences) close() error {
	cs.queue[len(cs.queue)-1].closed = true
	return cs.advance()
}

// words hands words to their sentences: a word reaching a sentence's last
// word, or one of a later sentence, completes it.
func (cs *chunkSentences) words(words []engine.Word) error {
	_ = cs.ss.out.note(cs.u, func(st *sentAudio) { st.words = append(st.words, words...) })
	for _, w := range words {
		sent := sentenceOf(cs.spans, w.CharStart)
		if sent < 0 && len(cs.queue) > 0 {
			// Without spans: the sentence begun last's.
			s := cs.queue[len(cs.queue)-1]
			s.words = append(s.words, w)
			continue
		}
		for _, s := range cs.queue {
			switch {
			case s.index == sent:
				s.words = append(s.words, w)
				s.complete = s.complete || s.lastChar >= 0 && w.CharEnd >= s.lastChar
			case sent > s.index:
				s.complete = true
			}
		}
	}
	return cs.advance()
}

func (cs *chunkSentences) end() error {
	cs.ended = true
	return cs.advance()
}

// advance sends what may go: the head's audio.start and held audio, and,
// once its audio and words are all here, its timestamps and audio.done;
// then the same of the next.
func (cs *chunkSentences) advance() error {
	for len(cs.queue) > 0 {
		s := cs.queue[0]
		if !s.started {
			s.started = true
			if err := cs.ss.out.event(cs.u, wsAudioStart{Type: evAudioStart, UtteranceIndex: cs.u.index, SentenceIndex: s.index,
				SentenceText: s.text, Format: cs.u.cfg.format, SampleRate: cs.rate, Channels: 1, RequestID: cs.requestID, WordTimestamps: true}); err != nil {
				return err
			}
			_ = cs.ss.out.note(cs.u, func(st *sentAudio) { st.current = s.index })
			if len(s.held) > 0 {
				if err := cs.send(s, s.held); err != nil {
					return err
				}
				s.held = nil
			}
		}
		if !s.closed || !s.complete && !cs.ended {
			return nil
		}
		if err := cs.finish(s); err != nil {
			return err
		}
		cs.queue = cs.queue[1:]
	}
	return nil
}

// finish sends s's timestamps, from its start, in an audio.chunk of no
// audio, then its audio.done.
func (cs *chunkSentences) finish(s *chunkSentence) error {
	ts := make([]chunkWord, 0, len(s.words))
	offset := cs.ms(s.start)
	for _, w := range s.words {
		ts = append(ts, chunkWord{Word: w.Word, StartMs: max(w.StartMs-offset, 0), EndMs: max(w.EndMs-offset, 0)})
	}
	ev := wsAudioChunk{Type: evAudioChunk, UtteranceIndex: cs.u.index, SentenceIndex: s.index, ChunkID: s.chunks,
		ChunkEndMs: cs.ms(s.samples), SampleRate: cs.rate, Channels: 1, AudioB64: []byte{}, Timestamps: &ts}
	if err := cs.ss.out.event(cs.u, ev); err != nil {
		return err
	}
	return cs.done(s, false)
}

// done sends s's audio.done.
func (cs *chunkSentences) done(s *chunkSentence, failed bool) error {
	return sentenceDone(cs.ss, cs.u, s.index, s.span, s.bytes, failed)
}

// cutShort ends the sentence going out with audio.done (error true); the
// ones after it are dropped.
func (cs *chunkSentences) cutShort() error {
	if len(cs.queue) == 0 || !cs.queue[0].started {
		return nil
	}
	s := cs.queue[0]
	cs.queue = nil
	return cs.done(s, true)
}

func (cs *chunkSentences) free() {}
