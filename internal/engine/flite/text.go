package flite

// The text the talker takes: checked, cleaned and mapped back to the
// input's characters.

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/omnistage/omnistage/internal/engine"
)

// MaxTextRunes is the longest text, in characters, that the talker, Analyze
// and SynthesizeTimed accept. 10000 characters are roughly 10 minutes of
// speech; a longer request is refused rather than held in memory and CPU.
const MaxTextRunes = 10000

// cleanText validates text and reduces it to the ASCII that flite's US
// English front end was written for. It refuses invalid UTF-8, NUL bytes,
// text over MaxTextRunes characters and text with nothing to speak (no
// letter or digit); it turns other control characters into spaces,
// transliterates Latin letters with diacritics and typographic punctuation
// (é → e, ß → ss, ’ → ', — → -), drops combining marks and replaces every
// other character with a space. Runs of more than maxTokenBytes
// non-space characters are broken with a space every maxTokenBytes.
func cleanText(text string) (string, error) {
	c, err := cleanTextMap(text)
	return c.text, err
}

// The refusals of text that more text may make speakable (a streamed
// request's first pieces).
var (
	errTextEmpty   = &engine.InputError{Reason: "text is empty"}
	errNoSpeakable = &engine.InputError{Reason: "text has nothing to speak (no letters or digits): the voices speak English, and read Latin letters (accents dropped) and digits; other scripts (Cyrillic, Greek, CJK, ...) and symbols are skipped"}
)

// asciiOf returns what a character other than ASCII is read as: its
// transliteration (é → e, ’ → '), else its compatibility decomposition
// when that is all ASCII, combining marks dropped (the ligature ﬁ → fi,
// full-width Ａ → A, ² → 2), else a space.
func asciiOf(r rune) string {
	if t, ok := translit[r]; ok {
		return t
	}
	var b strings.Builder
	for _, d := range norm.NFKD.String(string(r)) {
		switch {
		case d >= 0x20 && d < 0x7f:
			b.WriteRune(d)
		case unicode.Is(unicode.Mn, d):
		default:
			return " "
		}
	}
	if b.Len() == 0 {
		return " "
	}
	return b.String()
}

// cleaned is cleaned text with, for each of its bytes, the character of
// the input it came from.
type cleaned struct {
	text string
	// origin[i] is the index, in code points, of the input character that
	// byte i of text came from (an inserted space: the next byte's);
	// origin[len(text)] is the input's length in code points.
	origin []int32
}

// span returns the input's code-point span [start, end) that the bytes
// [from, to) of the cleaned text came from.
func (c cleaned) span(from, to int) (start, end int) {
	if from >= to {
		return int(c.origin[from]), int(c.origin[from])
	}
	return int(c.origin[from]), int(c.origin[to-1]) + 1
}

// cleanTextMap is cleanText, keeping where each byte came from.
func cleanTextMap(text string) (cleaned, error) {
	if !utf8.ValidString(text) {
		return cleaned{}, &engine.InputError{Reason: "text is not valid UTF-8"}
	}
	if strings.IndexByte(text, 0) >= 0 {
		return cleaned{}, &engine.InputError{Reason: "text contains a NUL character"}
	}
	if n := utf8.RuneCountInString(text); n > MaxTextRunes {
		return cleaned{}, &engine.InputError{Reason: fmt.Sprintf("text is %d characters long; the limit is %d", n, MaxTextRunes)}
	}
	if strings.TrimSpace(text) == "" {
		return cleaned{}, errTextEmpty
	}
	b := make([]byte, 0, len(text))
	origin := make([]int32, 0, len(text)+1)
	ri := int32(0)
	put := func(s string) {
		b = append(b, s...)
		for range len(s) {
			origin = append(origin, ri)
		}
	}
	for _, r := range text {
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			put(string(r))
		case r < 0x20 || r == 0x7f:
			put(" ")
		case r < 0x7f:
			put(string(r))
		case unicode.Is(unicode.Mn, r):
			// A combining accent: the base letter before it is kept.
		default:
			put(asciiOf(r))
		}
		ri++
	}
	origin = append(origin, ri)
	// A dropped character (an emoji, CJK) can leave punctuation standing
	// alone, which flite would read as a word with no sound: "before ."
	c := breakLongTokens(dropSpaceBeforePunct(cleaned{text: string(b), origin: origin}))
	speakable := false
	for i := 0; i < len(c.text) && !speakable; i++ {
		ch := c.text[i]
		speakable = ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
	}
	if !speakable {
		return cleaned{}, errNoSpeakable
	}
	return c, nil
}

var spaceBeforePunct = regexp.MustCompile(`[ \t]+([.,;:!?]+)(\s|$)`)

// dropSpaceBeforePunct deletes the spaces before punctuation that ends a
// token: "before ." becomes "before.".
func dropSpaceBeforePunct(c cleaned) cleaned {
	ms := spaceBeforePunct.FindAllStringSubmatchIndex(c.text, -1)
	if ms == nil {
		return c
	}
	var b strings.Builder
	origin := make([]int32, 0, len(c.origin))
	copied := 0
	for _, m := range ms {
		// Keep everything up to the spaces, drop them (m[0]..m[2]).
		b.WriteString(c.text[copied:m[0]])
		origin = append(origin, c.origin[copied:m[0]]...)
		copied = m[2]
	}
	b.WriteString(c.text[copied:])
	origin = append(origin, c.origin[copied:]...)
	return cleaned{text: b.String(), origin: origin}
}

// maxTokenBytes bounds a token: flite's letter-to-sound time grows with the
// square of a word's length (a 2000-letter word took 2 s; 128 letters 11 ms).
const maxTokenBytes = 100

func breakLongTokens(c cleaned) cleaned {
	s := c.text
	var b strings.Builder
	var origin []int32
	run, copied := 0, 0
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			run = 0
			continue
		}
		if run++; run > maxTokenBytes {
			if origin == nil {
				origin = make([]int32, 0, len(c.origin)+len(s)/maxTokenBytes)
			}
			b.WriteString(s[copied:i])
			origin = append(origin, c.origin[copied:i]...)
			b.WriteByte(' ')
			origin = append(origin, c.origin[i])
			copied, run = i, 1
		}
	}
	if copied == 0 {
		return c
	}
	b.WriteString(s[copied:])
	origin = append(origin, c.origin[copied:]...)
	return cleaned{text: b.String(), origin: origin}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// translit maps non-ASCII characters to ASCII that flite reads the same way.
var translit = map[rune]string{
	// Spaces and punctuation.
	'\u00a0': " ", '\u2002': " ", '\u2003': " ", '\u2009': " ", '\u200a': " ",
	'\u202f': " ", '\u2028': "\n", '\u2029': "\n\n",
	'\u2018': "'", '\u2019': "'", '\u201a': "'", '\u201b': "'", '\u2032': "'",
	'\u201c': "\"", '\u201d': "\"", '\u201e': "\"", '\u00ab': "\"", '\u00bb': "\"",
	'\u2010': "-", '\u2011': "-", '\u2012': "-", '\u2013': "-", '\u2014': " - ", '\u2212': "-",
	'\u2026': "...", '\u00b7': " ", '\u2022': " ",
	'\u00bf': " ", '\u00a1': " ",
	// Symbols flite knows in ASCII spelling.
	'\u00a3': " pounds ", '\u20ac': " euros ", '\u00a2': " cents ", '\u00b0': " degrees ",
	'\u00d7': " times ", '\u00bd': " one half ", '\u00bc': " one quarter ", '\u00be': " three quarters ",
	'\u00a9': " copyright ", '\u00ae': " registered ",
	// Latin-1 letters.
	'À': "A", 'Á': "A", 'Â': "A", 'Ã': "A", 'Ä': "A", 'Å': "A", 'Æ': "AE", 'Ç': "C",
	'È': "E", 'É': "E", 'Ê': "E", 'Ë': "E", 'Ì': "I", 'Í': "I", 'Î': "I", 'Ï': "I",
	'Ð': "D", 'Ñ': "N", 'Ò': "O", 'Ó': "O", 'Ô': "O", 'Õ': "O", 'Ö': "O", 'Ø': "O",
	'Ù': "U", 'Ú': "U", 'Û': "U", 'Ü': "U", 'Ý': "Y", 'Þ': "Th", 'ß': "ss",
	'à': "a", 'á': "a", 'â': "a", 'ã': "a", 'ä': "a", 'å': "a", 'æ': "ae", 'ç': "c",
	'è': "e", 'é': "e", 'ê': "e", 'ë': "e", 'ì': "i", 'í': "i", 'î': "i", 'ï': "i",
	'ð': "d", 'ñ': "n", 'ò': "o", 'ó': "o", 'ô': "o", 'õ': "o", 'ö': "o", 'ø': "o",
	'ù': "u", 'ú': "u", 'û': "u", 'ü': "u", 'ý': "y", 'þ': "th", 'ÿ': "y",
	// Latin Extended-A letters common in names.
	'Ā': "A", 'ā': "a", 'Ă': "A", 'ă': "a", 'Ą': "A", 'ą': "a", 'Ć': "C", 'ć': "c",
	'Č': "C", 'č': "c", 'Ď': "D", 'ď': "d", 'Đ': "D", 'đ': "d", 'Ē': "E", 'ē': "e",
	'Ė': "E", 'ė': "e", 'Ę': "E", 'ę': "e", 'Ě': "E", 'ě': "e", 'Ğ': "G", 'ğ': "g",
	'Ī': "I", 'ī': "i", 'Į': "I", 'į': "i", 'İ': "I", 'ı': "i", 'Ł': "L", 'ł': "l",
	'Ń': "N", 'ń': "n", 'Ň': "N", 'ň': "n", 'Ō': "O", 'ō': "o", 'Ő': "O", 'ő': "o",
	'Œ': "OE", 'œ': "oe", 'Ř': "R", 'ř': "r", 'Ś': "S", 'ś': "s", 'Ş': "S", 'ş': "s",
	'Š': "S", 'š': "s", 'Ţ': "T", 'ţ': "t", 'Ť': "T", 'ť': "t", 'Ū': "U", 'ū': "u",
	'Ů': "U", 'ů': "u", 'Ű': "U", 'ű': "u", 'Ų': "U", 'ų': "u", 'Ÿ': "Y", 'Ź': "Z",
	'ź': "z", 'Ż': "Z", 'ż': "z", 'Ž': "Z", 'ž': "z",
}
