package flite

// The sentences of a text that arrives in pieces: which of them more text
// can no longer change.

import (
	"strings"
	"unicode/utf8"
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
	base  int // code points of the text before raw (spoken already)
}

// sentence is a sentence cut from the text: its clean text, and its code
// points [start, end) in the whole text, which are input.
type sentence struct {
	text       string
	start, end int
	input      string
}

// add appends a piece of the text.
func (p *pending) add(piece string) { p.raw += piece }

// cutMode says which of a pending text's sentences are complete.
type cutMode int

const (
	// cutSettled: those that more text can no longer change: all but the
	// last, and the last too when its end is certain (certainEnd).
	cutSettled cutMode = iota
	// cutAll: every one, though more text may come: the client has
	// said (engine.Text.Break) that its text so far ends a sentence.
	cutAll
	// cutFinal: every one, at the text's end.
	cutFinal
)

// take returns the sentences that are complete, as mode says, to be
// spoken in order, and keeps the text after them. Text that has nothing
// to speak yet is kept for more, unless final.
func (p *pending) take(mode cutMode) ([]sentence, error) {
	final := mode == cutFinal
	c, err := cleanTextMap(p.raw)
	if err != nil {
		if !final && (err == errTextEmpty || err == errNoSpeakable) {
			return nil, nil
		}
		return nil, err
	}
	texts := splitSentences(p.voice, c.text)
	complete := len(texts) - 1 // the last may go on
	if mode != cutSettled || certainEnd(c.text) {
		complete = len(texts)
		final = true // nothing left after them but white space
	}
	if complete <= 0 {
		return nil, nil
	}
	out := make([]sentence, complete)
	pos := 0
	for i, s := range texts[:complete] {
		pos += strings.Index(c.text[pos:], s)
		start, end := c.span(pos, pos+len(s))
		input := p.raw[byteOfRune(p.raw, start):byteOfRune(p.raw, end)]
		out[i] = sentence{text: s, start: p.base + start, end: p.base + end, input: input}
		pos += len(s)
	}
	if final {
		p.base += utf8.RuneCountInString(p.raw)
		p.raw = ""
		return out, nil
	}
	pos += strings.Index(c.text[pos:], texts[complete])
	rest := int(c.origin[pos])
	cut := byteOfRune(p.raw, rest)
	p.base += rest
	p.raw = p.raw[cut:]
	return out, nil
}

// certainEnd reports whether text, a clean text so far, ends a sentence
// whatever comes after it, by flite's break rule: white space after a
// token whose closing punctuation holds '?', '!' or ':', or white space
// holding a blank line. After a '.', the rule needs the next token (a
// capital after "Dr." need not start a sentence), so a full stop is never
// a certain end.
func certainEnd(text string) bool {
	body := strings.TrimRight(text, " \t\r\n")
	ws := text[len(body):]
	switch {
	case ws == "":
		return false
	case strings.Count(ws, "\n") >= 2:
		return true
	}
	last := body[strings.LastIndexAny(body, " \t\r\n")+1:]
	punct := last[len(strings.TrimRightFunc(last, isClosing)):]
	return strings.ContainsAny(punct, "?!:")
}

// isClosing reports whether r is closing punctuation to flite's English
// tokenizer (its text_postpunctuation).
func isClosing(r rune) bool { return strings.ContainsRune("\"'`.,:;!?(){}[]", r) }

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
