package ocrtest

// Character error rate: how far a reader's text is from the reference.

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Normalize puts text in the form CER compares:
//
//   - Unicode NFKC, so that full-width Latin letters, digits and
//     punctuation ("，", "：", "１") equal their ASCII forms; "。" stays.
//   - Every run of white space, line breaks included, becomes one space,
//     and the ends are trimmed: readers break lines and paragraphs
//     differently (Tesseract ends paragraphs with a blank line), and the
//     words matter, not the layout.
//   - A space next to a Chinese or Japanese character or CJK punctuation
//     is dropped: Chinese is written without spaces, and readers put them
//     between characters or not.
//
// Case and punctuation are kept.
func Normalize(text string) string {
	rs := []rune(norm.NFKC.String(text))
	var b strings.Builder
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if !unicode.IsSpace(r) {
			b.WriteRune(r)
			continue
		}
		j := i
		for j < len(rs) && unicode.IsSpace(rs[j]) {
			j++
		}
		if i > 0 && j < len(rs) && !cjk(rs[i-1]) && !cjk(rs[j]) {
			b.WriteRune(' ')
		}
		i = j - 1
	}
	return b.String()
}

// cjk reports whether r is written without spaces around it.
func cjk(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		(r >= 0x3000 && r <= 0x303f) || // CJK symbols and punctuation: 。、「」
		(r >= 0xff00 && r <= 0xffef) // full-width forms NFKC keeps
}

// CER returns the character error rate of hyp against the reference ref:
// the edit distance (insertions, deletions and substitutions of code
// points) between their Normalize forms, over the reference's length. It
// is 0 for a perfect reading and may pass 1 when hyp has much more text
// than ref. An empty reference gives 0 for an empty hyp, else 1.
func CER(ref, hyp string) float64 {
	r, h := []rune(Normalize(ref)), []rune(Normalize(hyp))
	if len(r) == 0 {
		if len(h) == 0 {
			return 0
		}
		return 1
	}
	return float64(editDistance(r, h)) / float64(len(r))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// CERWithoutSpaces is CER with the white space of both texts dropped: a
// reader that drops the spaces between words loses on CER only.
func CERWithoutSpaces(ref, hyp string) float64 {
	return CER(noSpace(ref), noSpace(hyp))
}

func noSpace(s string) string {
	return strings.Join(strings.Fields(s), "")
}
