package sphinx

// Aligning a request's audio as it arrives: its first words as soon as
// the decoder has settled them, then a sentence at a time.
//
// # What goes out early, and why
//
// Playback starts with the first audio, so only the request's first words
// are needed before its first sentence is complete: the next ones are
// spoken a few hundred milliseconds later, and by then that sentence has
// long been synthesized and aligned whole (the pipeline speaks about 50
// times faster than real time). So the head of the audio, the start of
// the first sentence, is decoded as it arrives, block by block, until it
// settles its first words, which are sent at once; then every sentence is
// aligned whole once its mark has come, and its words not sent yet are
// sent.
//
// The unit sent early is the word. A clause is not enough (a first
// sentence often has no comma), and a word is settled as soon as the
// decoder's best hypothesis so far has gone past it: a hypothesis may only
// stop at a word's end, so its last word is still growing (fixing it then
// put boundaries 25 to 35 ms from flite's own on average, and still 14 ms
// when waiting 300 ms past its end), but every word before it stays where
// the final hypothesis puts it (all but 3 of 432 words of four voices,
// those a frame off; waiting 100 to 300 ms longer changed nothing). The
// first word would wait for the second to end, 0.6 s into "The committee
// met..."; so the grammar also leads from after the first word into a
// probe, the second word's first phone alone on a dead end, and a
// hypothesis that ends in the probe settles the first word at 0.4 s, as
// exactly (the mean error moved by 0.1 ms; probes after every word pulled
// later boundaries off by up to 200 ms, so there is only that one).
//
// Only the first words are sent from the blocks because, decoded block by
// block, the cepstra are normalized by a running mean that starts from the
// model's prior, not by the sentence's own mean, which is not known before
// its end: that costs about 2 ms of mean boundary error (13.7, 11.6, 13.4
// and 13.6 ms for slt, rms, awb and kal16 over 186 words in 18 sentences,
// against 11.8, 10.8, 11.1 and 11.7 decoded whole; with the sentence's own
// mean as the prior, the same as whole). A prior from the request's
// earlier sentences won back less than 1 ms of it.
//
// The head is fed in blocks of streamBlock samples from its start,
// whatever chunks the audio comes in, and the words are settled after
// every block: the timestamps are a function of the audio and its
// sentence marks, never of its chunking or timing.

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// streamBlock is how many samples the head is fed at a time: 100 ms, the
// vocoder's block.
const streamBlock = decoderRate / 10

// headMs is how much of the first sentence's audio the head decodes at
// most, waiting for its first words to settle.
const headMs = 2000

// alignment is one Process call: the transcript, the audio read so far and
// what was sent of it.
type alignment struct {
	a      *Aligner
	input  string // the transcript as given, for the entries' text
	out    engine.Sink
	words  []word
	groups [][]word // words by sentence
	in     *audioReader
	// spoken, when set, builds the transcript from the spans the audio
	// carries, as a streamed request's text is not known when it starts
	// (see spans.go).
	spoken *spokenText
	done   int       // sentences finished
	from   int       // where the next sentence's audio starts in in.pcm
	head   *sentence // the head being decoded; nil before and after
	// headOver is set once the head has been decoded; sent words of the
	// first sentence were sent from it, the last one ending at prevMs.
	headOver     bool
	sent, prevMs int
}

// run reads the audio to its end, aligning as it goes.
func (al *alignment) run(ctx context.Context) error {
	for {
		mark, err := al.in.next(ctx)
		if errors.Is(err, io.EOF) {
			return al.end(ctx)
		}
		if err != nil {
			return err
		}
		if al.spoken != nil && al.in.span != nil {
			if err := al.addSpan(al.in.span); err != nil {
				return err
			}
		}
		// Audio past the transcript's last sentence is not aligned.
		if al.done == len(al.groups) {
			continue
		}
		if !al.headOver {
			if err := al.feedHead(ctx, mark); err != nil {
				return err
			}
		}
		if mark && len(al.in.pcm) > al.from {
			if err := al.whole(ctx, al.groups[al.done], al.in.pcm[al.from:]); err != nil {
				return err
			}
			al.done, al.from = al.done+1, len(al.in.pcm)
		}
	}
}

// feedHead feeds the head the whole blocks that have come, starting it at
// the first audio, until they settle words, and sends those. Once it has
// sent them, at the first mark, or once headMs of audio have been fed,
// the head is over.
func (al *alignment) feedHead(ctx context.Context, mark bool) error {
	if al.head == nil {
		if len(al.in.pcm) == 0 {
			return nil
		}
		d, err := al.a.pool.get(ctx)
		if err != nil {
			return err
		}
		if al.head, err = newSentence(d, al.groups[0], 0); err != nil {
			return err
		}
	}
	s := al.head
	for !mark && s.sent == 0 && len(al.in.pcm)-s.fed >= streamBlock && s.fedMs() < headMs {
		if err := s.feed(al.in.pcm[s.fed : s.fed+streamBlock]); err != nil {
			return err
		}
		if err := al.send(ctx, s.timed(s.settled(), s.fedMs())); err != nil {
			return err
		}
	}
	if mark || s.sent > 0 || s.fedMs() >= headMs {
		al.endHead()
	}
	return nil
}

// endHead gives the head's decoder back and keeps what it sent.
func (al *alignment) endHead() {
	if al.head != nil {
		al.sent, al.prevMs = al.head.sent, al.head.prevMs
		al.a.pool.put(al.head.d)
		al.head = nil
	}
	al.headOver = true
}

// end is what happens when the audio has ended.
func (al *alignment) end(ctx context.Context) error {
	al.endHead()
	pcm, _, err := al.in.finish()
	if err != nil {
		if al.spoken != nil && len(al.words) == 0 && al.in.n == 0 {
			// No audio, and no text known but the spans it would have
			// carried: a talker that had nothing of its text to speak
			// (an image read aloud without words) said so, and its
			// request has no words to time.
			return nil
		}
		return err
	}
	if al.spoken != nil && len(al.words) == 0 {
		if err := al.spoken.fallback(al); err != nil {
			return err
		}
	}
	if al.done == len(al.groups) {
		return nil
	}
	// Sentences left without their marks are aligned together.
	var rest []word
	for _, g := range al.groups[al.done:] {
		rest = append(rest, g...)
	}
	return al.whole(ctx, rest, pcm[al.from:])
}

// whole aligns words on pcm, the audio from sample al.from on, decoded at
// once, and sends them but those the head sent, after them. Without audio,
// the words are placed, untimed, at its start. The decode is due when the
// listener reaches the first word it sends (engine.NeededAt): the
// pipeline speaks far faster than real time, so a later sentence's words
// give way to the audio, and to other requests' first words, that play
// before them.
func (al *alignment) whole(ctx context.Context, words []word, pcm []int16) error {
	sent, prevMs := 0, 0
	if al.done == 0 {
		sent, prevMs = al.sent, al.prevMs
	}
	aligned := make([]engine.Word, len(words))
	if len(pcm) > 0 {
		var err error
		neededMs := al.from*1000/decoderRate + prevMs // the head's prevMs: sentence 0's, from 0
		needed := engine.NeededAt(ctx, time.Duration(neededMs)*time.Millisecond)
		if aligned, err = al.a.align(needed, words, pcm, len(pcm)*1000/decoderRate); err != nil {
			return err
		}
	}
	for i := range aligned[sent:] {
		w := &aligned[sent+i]
		w.StartMs = max(w.StartMs, prevMs)
		w.EndMs = max(w.EndMs, w.StartMs)
		prevMs = w.EndMs
	}
	shift(aligned, al.from)
	return al.send(ctx, timedWords{words[sent:], aligned[sent:]})
}

// timedWords are transcript words and their timestamps.
type timedWords struct {
	words []word
	times []engine.Word
}

// send sends the entries of t's words as one chunk, unless there are
// none.
func (al *alignment) send(ctx context.Context, t timedWords) error {
	if len(t.words) == 0 {
		return nil
	}
	return al.out.Send(ctx, engine.Chunk{Words: &engine.Words{Words: entries(al.input, t.words, t.times)}})
}

// drop gives back the decoder the head holds, if any.
func (al *alignment) drop() {
	if al.head != nil {
		al.a.pool.put(al.head.d)
		al.head = nil
	}
}

// sentence decodes a sentence's audio as it comes, on a decoder it holds,
// and settles its words one by one.
type sentence struct {
	d       *decoder
	words   []word
	aligned []bool  // which words are in the grammar
	probe   string  // the probe's key in the grammar, or ""
	start   int     // the sentence's first sample in the request's audio
	fed     int     // samples fed to the decoder
	e       *energy // of the audio fed
	fixed   []span  // the places of the words settled so far, in order
	sent    int     // words sent so far
	prevMs  int     // the end of the last word sent
}

// newSentence prepares d for words, the sentence whose audio starts at
// sample start of the request's, and starts its utterance.
func newSentence(d *decoder, words []word, start int) (*sentence, error) {
	s := &sentence{d: d, words: words, start: start, e: newEnergy(nil)}
	var err error
	if s.aligned, s.probe, err = prepare(d, words, true); err != nil {
		return s, err
	}
	return s, d.startStream()
}

// fedMs is the duration of the audio fed so far.
func (s *sentence) fedMs() int { return s.fed * 1000 / decoderRate }

// feed decodes one more block and settles every word the hypothesis so
// far has gone past.
func (s *sentence) feed(block []int16) error {
	if err := s.d.feed(block); err != nil {
		return err
	}
	s.e.add(block)
	s.fed += len(block)
	segs, ok, err := s.d.segments()
	if err != nil || !ok {
		return err
	}
	if spans, n, ok := placePrefix(s.words, s.aligned, segs, s.probe); ok && n > len(s.fixed) {
		s.fixed = append(s.fixed, spans[len(s.fixed):n]...)
	}
	return nil
}

// settled is how many of the words can be sent: those settled, but not a
// token's words before all of them are.
func (s *sentence) settled() int {
	n := len(s.fixed)
	for n > s.sent && n < len(s.words) && s.words[n].token == s.words[n-1].token {
		n--
	}
	return n
}

// timed returns the settled words from the last sent up to n with their
// timestamps, and counts them sent: trimmed, made monotonic after the
// words sent before and clamped to durMs, timed from the request's start.
func (s *sentence) timed(n, durMs int) timedWords {
	if n <= s.sent {
		return timedWords{}
	}
	ps := append([]span(nil), s.fixed[s.sent:n]...)
	trim(ps, s.e)
	ws := s.words[s.sent:n]
	aligned, prev := finishAfter(ws, ps, s.prevMs, durMs)
	s.sent, s.prevMs = n, prev
	shift(aligned, s.start)
	return timedWords{ws, aligned}
}

// shift moves word times by the start of their audio, from sample start
// of the request's.
func shift(ws []engine.Word, start int) {
	ms := start * 1000 / decoderRate
	for i := range ws {
		ws[i].StartMs += ms
		ws[i].EndMs += ms
	}
}
