package flite

// The sentences of a text that arrives in pieces: which of them more text
// can no longer change.

import (
	"strings"
)

// pending is the text of a talker job that has arrived and is not spoken
// yet. Its sentences are cut exactly as the whole text's would be: a
// sentence is complete once the next one has begun, because flite's break
// rule looks only at a token's punctuation, the white space after it and
// the first character of the next token, and the byte bound counts from
// the sentence's start (TestPendingCutsAsWhole cuts texts at every
// character).
type pending struct {
	voice *voice
	raw   string
}

// add appends a piece of the text.
func (p *pending) add(piece string) { p.raw += piece }

// take returns the sentences that are complete, to be spoken in order,
// and keeps the text after them; at the text's end (final) every sentence
// is complete. Text that has nothing to speak yet is kept for more, unless
// final.
func (p *pending) take(final bool) ([]string, error) {
	c, err := cleanTextMap(p.raw)
	if err != nil {
		if !final && (err == errTextEmpty || err == errNoSpeakable) {
			return nil, nil
		}
		return nil, err
	}
	sentences := splitSentences(p.voice, c.text)
	if final {
		p.raw = ""
		return sentences, nil
	}
	complete := len(sentences) - 1 // the last may go on
	if complete <= 0 {
		return nil, nil
	}
	rest := sentenceStart(c.text, sentences, complete)
	p.raw = p.raw[byteOfRune(p.raw, int(c.origin[rest])):]
	return sentences[:complete], nil
}

// sentenceStart returns the byte offset in text of sentences[k], given
// that the sentences are substrings of text, in order.
func sentenceStart(text string, sentences []string, k int) int {
	pos := 0
	for i, s := range sentences[:k+1] {
		pos += strings.Index(text[pos:], s)
		if i < k {
			pos += len(s)
		}
	}
	return pos
}

// byteOfRune returns the byte offset of code point n of s (len(s) for n
// past its end).
func byteOfRune(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
