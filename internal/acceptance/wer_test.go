package acceptance

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/engine/sphinx"
)

// Word error rate.
//
// The reference is what flite says it speaks (flite.Analyze: numbers and
// abbreviations spelled out, "'s" a word of its own, apostrophes dropped);
// the hypothesis is what the recognizer heard, spelled as its dictionary
// spells words ("dr", "didn't", "company's", "percent"). Two spellings of
// the same sound are not an error of the speech, so before counting:
//
//   - a reference word that starts with an apostrophe ("'s") is joined to
//     the word before it, and "per cent" is joined into one word;
//   - words compare equal when they are the same without apostrophes or
//     when the recognizer's dictionary gives them a pronunciation in
//     common ("dr" and "doctor", "four" and "for", "st" and "street").
//
// Homophones counting as equal makes the measure a little kinder than a
// strict transcript comparison; it still only credits words the listener
// heard as sounding right, which is what intelligibility means here.

// lexicon maps a dictionary word, lower-case without apostrophes, to its
// pronunciations.
type lexicon map[string][]string

var lex struct {
	once sync.Once
	l    lexicon
	err  error
}

// sharedLexicon loads the recognizer's dictionary once per test binary.
func sharedLexicon(tb testing.TB) lexicon {
	tb.Helper()
	lex.once.Do(func() { lex.l, lex.err = loadLexicon(sphinx.DefaultDict) })
	if lex.err != nil {
		tb.Fatal(lex.err)
	}
	return lex.l
}

func loadLexicon(path string) (lexicon, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := lexicon{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		word, pron, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if i := strings.IndexByte(word, '('); i > 0 {
			word = word[:i]
		}
		k := key(word)
		l[k] = append(l[k], strings.TrimSpace(pron))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// key is the form words are compared in: lower-case, no apostrophes.
func key(w string) string {
	return strings.ReplaceAll(strings.ToLower(w), "'", "")
}

// same reports whether the reference word r and the heard word h are the
// same word or sound the same.
func (l lexicon) same(r, h string) bool {
	if r == h {
		return true
	}
	for _, p := range l[r] {
		for _, q := range l[h] {
			if p == q {
				return true
			}
		}
	}
	return false
}

// refWords puts the words flite speaks in comparable form.
func refWords(words []string) []string {
	var out []string
	for _, w := range words {
		k := key(w)
		switch {
		case k == "":
		case strings.HasPrefix(w, "'") && len(out) > 0:
			out[len(out)-1] += k
		case k == "cent" && len(out) > 0 && out[len(out)-1] == "per":
			out[len(out)-1] = "percent"
		default:
			out = append(out, k)
		}
	}
	return out
}

// hypWords puts the recognizer's hypothesis in comparable form.
func hypWords(hyp string) []string {
	var out []string
	for _, w := range strings.Fields(hyp) {
		out = append(out, key(w))
	}
	return out
}

// wordErrors is the edit distance between ref and hyp in words:
// substitutions, deletions and insertions.
func (l lexicon) wordErrors(ref, hyp []string) int {
	prev := make([]int, len(hyp)+1)
	cur := make([]int, len(hyp)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ref); i++ {
		cur[0] = i
		for j := 1; j <= len(hyp); j++ {
			sub := prev[j-1]
			if !l.same(ref[i-1], hyp[j-1]) {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(hyp)]
}

// wer is the word error rate of hyp against ref: word errors over
// reference words. It exceeds 1 when the listener hears more words than
// were spoken.
func (l lexicon) wer(ref, hyp []string) float64 {
	if len(ref) == 0 {
		return float64(len(hyp))
	}
	return float64(l.wordErrors(ref, hyp)) / float64(len(ref))
}

func TestWER(t *testing.T) {
	l := sharedLexicon(t)
	tests := []struct {
		ref  []string // as flite.Analyze gives them
		hyp  string   // as the recognizer gives it
		errs int
	}{
		{[]string{"the", "cat"}, "the cat", 0},
		{[]string{"the", "cat"}, "", 2},
		{[]string{"the", "cat"}, "a cat sat", 2},
		{[]string{"doctor", "smith", "didnt", "mind"}, "dr smith didn't mind", 0},
		{[]string{"the", "company", "'s", "twelve", "per", "cent"}, "the company's twelve percent", 0},
		{[]string{"twenty", "four"}, "twenty for", 0},
		{[]string{"main", "street"}, "main st", 0},
		{[]string{"one", "two", "three"}, "three two one", 2},
	}
	for _, tt := range tests {
		ref, hyp := refWords(tt.ref), hypWords(tt.hyp)
		if got := l.wordErrors(ref, hyp); got != tt.errs {
			t.Errorf("wordErrors(%q, %q) = %d, want %d", ref, hyp, got, tt.errs)
		}
	}
	if got := l.wer(refWords([]string{"a", "b", "c", "d"}), hypWords("a x c")); got != 0.5 {
		t.Errorf("wer = %g, want 0.5", got)
	}
}
