package flite

import (
	"errors"
	"fmt"
	"math"

	"github.com/omnistage/omnistage/internal/engine"
)

// WordPron is a normalized word as flite's text analysis produced it, with
// its phones (flite phone names, lower-case, e.g. "hh","ax","l","ow"; no
// pauses).
type WordPron struct {
	Word   string
	Phones []string
}

// Analyze runs flite's text analysis (tokenization, normalization of
// numbers/punctuation/abbreviations, lexicon and letter-to-sound) on text
// with the given voice and returns the words the talker would speak, in
// order.
//
// Analyze cleans and splits text exactly as the talker does, one sentence
// per utterance, and includes post-lexical rules, so the words and phones
// are the ones the talker speaks. Bad text is an *engine.InputError.
func Analyze(text, voice string) ([]WordPron, error) {
	v, sentences, err := prepare(text, voice)
	if err != nil {
		return nil, err
	}
	var out []WordPron
	for _, s := range sentences {
		u, err := synthText(v, s, 0, true)
		if errors.Is(err, errEmpty) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("flite: analyze: %w", err)
		}
		for _, w := range u.words() {
			out = append(out, WordPron{Word: w.name, Phones: w.phones})
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

// prepare initializes flite, resolves the voice, cleans text and splits it
// into the sentences the talker synthesizes one at a time.
func prepare(text, voiceName string) (*voice, []string, error) {
	if err := initFlite(); err != nil {
		return nil, nil, err
	}
	v, err := lookupVoice(voiceName)
	if err != nil {
		return nil, nil, err
	}
	clean, err := cleanText(text)
	if err != nil {
		return nil, nil, err
	}
	sentences := splitSentences(v, clean)
	if len(sentences) == 0 {
		return nil, nil, &engine.InputError{Reason: "text has nothing to speak"}
	}
	return v, sentences, nil
}
