package flite

// Flite's text analysis on its own: the words and pronunciations of a text,
// and synthesis with word times (the aligner's and the tests' references).

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// WordPron is a normalized word as flite's text analysis produced it, with
// its phones (flite phone names, lower-case, e.g. "hh","ax","l","ow"; no
// pauses) and the token of the input it was made from.
type WordPron struct {
	Word   string
	Phones []string
	// Token numbers the input's tokens that made words, from 0 in input
	// order: the words of one token ("$100": "one", "hundred", "dollars")
	// share it.
	Token int
	// CharStart and CharEnd are the token's span of the input text, in
	// code points, end exclusive: input[CharStart:CharEnd] is the token as
	// written ("$100"), without the punctuation around it.
	CharStart, CharEnd int
	// Sentence numbers the sentences that have words, from 0: the talker
	// speaks each as one chunk, and the vocoder marks the end of each.
	Sentence int
}

// Analyze runs flite's text analysis (tokenization, normalization of
// numbers/punctuation/abbreviations, lexicon and letter-to-sound) on text
// with the given voice and returns the words the talker would speak, in
// order, each with the token of text it came from.
//
// Analyze cleans and splits text exactly as the talker does, one sentence
// per utterance, and includes post-lexical rules, so the words and phones
// are the ones the talker speaks. Bad text is an *engine.InputError.
func Analyze(text, voice string) ([]WordPron, error) {
	v, c, sentences, err := prepareMap(text, voice)
	if err != nil {
		return nil, err
	}
	var (
		out      []WordPron
		cursor   int // where the next token's search starts, in c.text
		token    = -1
		sentence = -1
	)
	for _, s := range sentences {
		u, err := synthText(v, s, 0, true)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("flite: analyze: %w", err)
		}
		lastID := -2
		var start, end int
		words := u.words()
		if len(words) > 0 {
			sentence++
		}
		for _, w := range words {
			if w.tokenID < 0 || w.tokenID != lastID {
				// A new token: find it in the cleaned text, after the last.
				token++
				lastID = w.tokenID
				from, to := cursor, cursor
				if i := strings.Index(c.text[cursor:], w.token); w.token != "" && i >= 0 {
					from, to = cursor+i, cursor+i+len(w.token)
					cursor = to
				}
				start, end = c.span(from, to)
			}
			out = append(out, WordPron{Word: w.name, Phones: w.phones, Token: token, CharStart: start, CharEnd: end, Sentence: sentence})
		}
		u.free()
	}
	if len(out) == 0 {
		return nil, &engine.InputError{Reason: "text has nothing to speak"}
	}
	return out, nil
}

// SynthesizeTimed synthesizes text in one call (flite_text_to_wave-equivalent
// path, srand(seed) first) and returns the 16 kHz audio and flite's
// ground-truth word times from the Word relation (start =
// R:SylStructure.daughter1.daughter1.R:Segment.p.end, end =
// R:SylStructure.daughtern.daughtern.R:Segment.end, in ms), for testing the
// aligner.
//
// The text is cleaned as the talker cleans it but not split: the whole text
// is one utterance. Word times are rounded to the nearest millisecond and
// clamped to the audio's duration.
func SynthesizeTimed(text, voice string, seed int) (*engine.Audio, []engine.Word, error) {
	if seed < 0 || int64(seed) > math.MaxUint32 {
		return nil, nil, &engine.ParamError{Field: "seed", Reason: fmt.Sprintf("%d is out of range 0..%d", seed, uint32(math.MaxUint32))}
	}
	if err := initFlite(); err != nil {
		return nil, nil, err
	}
	v, err := lookupVoice(voice)
	if err != nil {
		return nil, nil, err
	}
	clean, err := cleanText(text)
	if err != nil {
		return nil, nil, err
	}
	u, err := synthText(v, clean, uint32(seed), false)
	if errors.Is(err, errEmpty) {
		return nil, nil, &engine.InputError{Reason: "text has nothing to speak"}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("flite: synthesize: %w", err)
	}
	defer u.free()
	a, err := u.audio()
	if err != nil {
		return nil, nil, err
	}
	durMs := len(a.Samples) * 1000 / a.SampleRate
	var words []engine.Word
	for _, w := range u.words() {
		start, end := toMs(w.start, durMs), toMs(w.end, durMs)
		if start < 0 {
			start = 0
		}
		if end < start {
			end = start
		}
		words = append(words, engine.Word{Word: w.name, StartMs: start, EndMs: end})
	}
	return a, words, nil
}

func toMs(sec float32, maxMs int) int {
	if sec < 0 {
		return -1
	}
	ms := int(math.Round(float64(sec) * 1000))
	return min(ms, maxMs)
}

// prepareMap initializes flite, resolves the voice, cleans text and splits
// it into sentences; it also returns the cleaned text the sentences were
// cut from, with where each of its bytes came from.
func prepareMap(text, voiceName string) (*voice, cleaned, []string, error) {
	if err := initFlite(); err != nil {
		return nil, cleaned{}, nil, err
	}
	v, err := lookupVoice(voiceName)
	if err != nil {
		return nil, cleaned{}, nil, err
	}
	c, err := cleanTextMap(text)
	if err != nil {
		return nil, cleaned{}, nil, err
	}
	sentences := splitSentences(v, c.text)
	if len(sentences) == 0 {
		return nil, cleaned{}, nil, &engine.InputError{Reason: "text has nothing to speak"}
	}
	return v, c, sentences, nil
}
