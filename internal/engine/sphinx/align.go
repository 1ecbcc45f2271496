package sphinx

// Placing the transcript's words on the decoder's segments, and the
// fallbacks when it finds none.

import (
	"math"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// span is a word's place in milliseconds, [start, end), and whether the
// decoder put a silence (or the utterance's edge) right before and after
// it.
type span struct {
	start, end          int
	silBefore, silAfter bool
}

// place maps the decoder's segments onto words in order. Only words with
// aligned[i] set were in the grammar. Silences, fillers and null
// transitions are skipped and alternate-pronunciation suffixes ("(2)")
// stripped. It returns one span per word (the unaligned ones get an empty
// span where they stand) and false when the segments do not spell the
// grammar's words exactly.
func place(words []word, aligned []bool, segs []segment) ([]span, bool) {
	spans, _, ok := placePrefix(words, aligned, segs, "")
	if !ok || len(spans) == 0 || slices.Contains(aligned[len(spans):], true) {
		return nil, false
	}
	// The utterance's end counts as a silence.
	spans[len(spans)-1].silAfter = true
	for len(spans) < len(words) {
		end := spans[len(spans)-1].end
		spans = append(spans, span{start: end, end: end})
	}
	return spans, true
}

// placePrefix is place for a hypothesis that may stop short of the
// grammar's end, as one does while the audio is still coming: it returns
// a span for each word up to the last aligned word the segments reach
// (none when they reach none), how many of those words the hypothesis has
// gone past (all but the last, or all when the probe follows the last),
// and false when a segment is neither the next aligned word, the probe
// nor a filler.
func placePrefix(words []word, aligned []bool, segs []segment, probe string) ([]span, int, bool) {
	var spans []span
	past := false
	next := 0 // index of the next word to match
	skip := func() {
		for next < len(words) && !aligned[next] {
			next++
		}
	}
	skip()
	sil := true
	for _, s := range segs {
		w := baseWord(s.word)
		if probe != "" && w == probe && len(spans) > 0 {
			past = true
			continue
		}
		if next < len(words) && w == words[next].key {
			// Words left out of the grammar sit, empty, where the
			// previous word ends.
			end := 0
			if len(spans) > 0 {
				end = spans[len(spans)-1].end
			}
			for len(spans) < next {
				spans = append(spans, span{start: end, end: end})
			}
			spans = append(spans, span{start: s.sf * frameMs, end: (s.ef + 1) * frameMs, silBefore: sil})
			sil = false
			next++
			skip()
			continue
		}
		if !isFiller(w) {
			return nil, 0, false
		}
		if w != nullWord {
			sil = true
			if len(spans) > 0 {
				spans[len(spans)-1].silAfter = true
			}
		}
	}
	settled := max(len(spans)-1, 0)
	if past {
		settled = len(spans)
	}
	return spans, settled, true
}

// nullWord is the segment sphinx reports for a null transition.
const nullWord = "(NULL)"

// baseWord strips an alternate-pronunciation suffix: "the(2)" → "the".
func baseWord(w string) string {
	if i := strings.LastIndexByte(w, '('); i > 0 && strings.HasSuffix(w, ")") {
		return w[:i]
	}
	return w
}

// isFiller reports whether w is a silence, a noise or the null word: the
// filler dictionary's entries are bracketed ("<sil>", "[NOISE]",
// "++NOISE++") and the null transition is "(NULL)".
func isFiller(w string) bool {
	return w == "" || w[0] == '<' || w[0] == '[' || w[0] == '+' || w[0] == '('
}

// Edge trimming. The decoder's 25 ms analysis window and its delta
// features smear a word's first and last sounds into a silence beside it,
// so a word next to a pause is placed 20 to 40 ms too wide on that side.
// trim moves such an edge to where the audio is no longer silent, within
// maxTrimMs and leaving the word at least minWordMs.
const (
	// maxTrimMs bounds how far an edge moves.
	maxTrimMs = 80
	// minWordMs is the shortest a trimmed word becomes.
	minWordMs = 30
)

func trim(spans []span, e *energy) {
	threshold := e.peak() * math.Pow(10, -silenceDB/10.0)
	for i := range spans {
		s := &spans[i]
		if s.silBefore {
			limit := min(s.start+maxTrimMs, s.end-minWordMs)
			for s.start+blockMs <= limit && e.at(s.start) < threshold {
				s.start += blockMs
			}
		}
		if s.silAfter {
			limit := max(s.end-maxTrimMs, s.start+minWordMs)
			for s.end-blockMs >= limit && e.at(s.end-blockMs) < threshold {
				s.end -= blockMs
			}
		}
	}
}

// split spreads words over the speech in proportion to their phone
// counts, between the first and the last block of e louder than the
// silence threshold. It is the fallback when the decoder finds no
// alignment.
func split(words []word, e *energy) []span {
	first, last := e.speechBounds()
	total := 0
	for _, w := range words {
		total += max(w.nPhones, 1)
	}
	spans := make([]span, len(words))
	length := last - first
	acc := 0
	for i, w := range words {
		s := first + length*acc/total
		acc += max(w.nPhones, 1)
		spans[i] = span{start: s, end: first + length*acc/total}
	}
	return spans
}

// silenceDB is how far below the utterance's loudest block a block must
// stay to count as silence, for trimming and for the split fallback.
const silenceDB = 40

// blockMs is the resolution of energy, in milliseconds.
const blockMs = 5

const blockSamples = decoderRate * blockMs / 1000

// energy is the energy of 16 kHz audio per blockMs block.
type energy struct {
	blocks []float64
	n      int // samples added
	durMs  int
}

func newEnergy(samples []int16) *energy {
	e := &energy{}
	e.add(samples)
	return e
}

// add appends samples to the audio e measures.
func (e *energy) add(samples []int16) {
	for _, s := range samples {
		if e.n%blockSamples == 0 {
			e.blocks = append(e.blocks, 0)
		}
		e.blocks[len(e.blocks)-1] += float64(s) * float64(s)
		e.n++
	}
	e.durMs = e.n * 1000 / decoderRate
}

func (e *energy) peak() float64 {
	p := 0.0
	for _, b := range e.blocks {
		p = max(p, b)
	}
	return p
}

// at returns the energy of the block that holds millisecond ms (0 past
// the end).
func (e *energy) at(ms int) float64 {
	i := ms / blockMs
	if i < 0 || i >= len(e.blocks) {
		return 0
	}
	return e.blocks[i]
}

// speechBounds returns, in milliseconds, where the first loud block starts
// and where the last one ends; the whole stream when it is all silent.
func (e *energy) speechBounds() (startMs, endMs int) {
	peak := e.peak()
	if peak == 0 {
		return 0, e.durMs
	}
	threshold := peak * math.Pow(10, -silenceDB/10.0)
	first, last := 0, len(e.blocks)-1
	for first < last && e.blocks[first] < threshold {
		first++
	}
	for last > first && e.blocks[last] < threshold {
		last--
	}
	return first * blockMs, min((last+1)*blockMs, e.durMs)
}

// finish turns spans into timestamps: clamped to [0, durMs], each start at
// or after the previous word's end, each end at or after its start.
func finish(words []word, spans []span, durMs int) []engine.Word {
	out, _ := finishAfter(words, spans, 0, durMs)
	return out
}

// finishAfter is finish for words that follow others already timed up to
// prev; it also returns the last word's end.
func finishAfter(words []word, spans []span, prev, durMs int) ([]engine.Word, int) {
	out := make([]engine.Word, len(words))
	for i, w := range words {
		s := min(max(spans[i].start, prev), durMs)
		e := min(max(spans[i].end, s), durMs)
		out[i] = engine.Word{Word: w.name, StartMs: s, EndMs: e}
		prev = e
	}
	return out, prev
}
