package sphinx

// The transcript: the words flite says for the input, their dictionary
// entries, and the timestamps tied back to the input's spans.

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
)

// word is one transcript word as the aligner handles it.
type word struct {
	// name is the normalized word as flite's text analysis produced it;
	// it is what the timestamps report.
	name string
	// key is the word's dictionary entry: the lower-case name when that
	// is a plain word, else a name derived from the word and its phones.
	key string
	// phones is flite's pronunciation in ARPAbet, for words the
	// dictionary lacks; "" when flite gave none that maps.
	phones string
	// nPhones is the number of phones, a duration estimate for the split
	// fallback.
	nPhones int
	// token numbers the input token the word was made from (flite's
	// WordPron.Token), charStart and charEnd are its span of the input.
	token, charStart, charEnd int
	// sentence numbers the word's sentence (flite's WordPron.Sentence).
	sentence int
}

// transcript runs flite's text analysis on text, the way the talker
// normalizes it, and returns the words the audio should hold.
func transcript(text, voice string) ([]word, error) {
	prons, err := flite.Analyze(text, voice)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	words := make([]word, 0, len(prons))
	for _, p := range prons {
		w := word{name: p.Word, token: p.Token, charStart: p.CharStart, charEnd: p.CharEnd, sentence: p.Sentence}
		arpa, ok := toARPAbet(p.Phones)
		if ok {
			w.phones = strings.Join(arpa, " ")
			w.nPhones = len(arpa)
		}
		w.key = dictKey(p.Word, w.phones)
		words = append(words, w)
	}
	return words, nil
}

// maxKeyLen bounds a dictionary key taken from the word itself.
const maxKeyLen = 64

// dictKey returns the dictionary entry for a word: its lower-case form
// when that is a plain word the dictionary may hold, else a synthetic key
// that cannot collide with a real word, clash with sphinx's syntax for
// alternate pronunciations ("word(2)") or fillers ("<sil>", "[NOISE]"),
// or change meaning between requests (it includes the phones).
func dictKey(name, phones string) string {
	k := strings.ToLower(name)
	if plain(k) {
		return k
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(phones))
	return fmt.Sprintf("omni-oov-%016x", h.Sum64())
}

func plain(k string) bool {
	if k == "" || len(k) > maxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '\'' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// arpabet maps flite's US English phones (the "us" phone set every voice
// uses) to the en-us acoustic model's phones. Pauses map to nothing.
// Flite has a few phones the model lacks: syllabic consonants become a
// schwa and the consonant, the flap becomes D, the nasal flap N and the
// voiced h HH.
var arpabet = map[string][]string{
	"aa": {"AA"}, "ae": {"AE"}, "ah": {"AH"}, "ao": {"AO"}, "aw": {"AW"},
	"ax": {"AH"}, "axr": {"ER"}, "ay": {"AY"}, "b": {"B"}, "ch": {"CH"},
	"d": {"D"}, "dh": {"DH"}, "dx": {"D"}, "eh": {"EH"}, "el": {"AH", "L"},
	"em": {"AH", "M"}, "en": {"AH", "N"}, "er": {"ER"}, "ey": {"EY"},
	"f": {"F"}, "g": {"G"}, "hh": {"HH"}, "hv": {"HH"}, "ih": {"IH"},
	"iy": {"IY"}, "jh": {"JH"}, "k": {"K"}, "l": {"L"}, "m": {"M"},
	"n": {"N"}, "nx": {"N"}, "ng": {"NG"}, "ow": {"OW"}, "oy": {"OY"},
	"p": {"P"}, "r": {"R"}, "s": {"S"}, "sh": {"SH"}, "t": {"T"},
	"th": {"TH"}, "uh": {"UH"}, "uw": {"UW"}, "v": {"V"}, "w": {"W"},
	"y": {"Y"}, "z": {"Z"}, "zh": {"ZH"},
	"pau": nil, "h#": nil, "brth": nil,
}

// toARPAbet converts flite phones to model phones. It reports false when
// a phone is unknown or nothing is left to pronounce.
func toARPAbet(phones []string) ([]string, bool) {
	out := make([]string, 0, len(phones)+2)
	for _, p := range phones {
		m, ok := arpabet[strings.ToLower(p)]
		if !ok {
			return nil, false
		}
		out = append(out, m...)
	}
	return out, len(out) > 0
}

// entries groups the aligned words, one per transcript word, into one
// entry per input token: the input's text of the token's span, spoken as
// its words, from the first one's start to the last one's end.
func entries(input string, words []word, aligned []engine.Word) []engine.Word {
	runes := []rune(input)
	var out []engine.Word
	for i, w := range words {
		if i > 0 && w.token == words[i-1].token {
			e := &out[len(out)-1]
			e.EndMs = aligned[i].EndMs
			e.Spoken = append(e.Spoken, w.name)
			continue
		}
		out = append(out, engine.Word{
			Word:      string(runes[min(w.charStart, len(runes)):min(w.charEnd, len(runes))]),
			CharStart: w.charStart, CharEnd: w.charEnd,
			StartMs: aligned[i].StartMs, EndMs: aligned[i].EndMs,
			Spoken: []string{w.name},
		})
	}
	return out
}

// bySentence cuts words into their sentences, in order.
func bySentence(words []word) [][]word {
	var out [][]word
	for i, w := range words {
		if i == 0 || w.sentence != words[i-1].sentence {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], w)
	}
	return out
}
