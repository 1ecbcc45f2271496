package sphinx

// The transcript of a request whose text is not known when it starts (a
// streamed request): built a sentence at a time from the spans its audio
// carries.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// spokenText is a request's text as the spans of its audio give it.
type spokenText struct {
	// feed is the request's text as it arrives, when the request runs in
	// this process; the transcript falls back on it when the audio
	// carries no spans.
	feed   *engine.Feed
	runes  []rune // the request's text, where the spans have given it
	tokens int    // the tokens of the sentences added so far
	last   int    // the index of the last sentence added; -1 before
}

// newSpokenText returns the empty transcript of a request whose text
// arrives in feed (nil when it arrives elsewhere).
func newSpokenText(feed *engine.Feed) *spokenText {
	return &spokenText{feed: feed, last: -1}
}

// addSpan adds the sentence of sp to the transcript: the analysis of its
// text, with its offsets into the request's text and its tokens numbered
// after those of the sentences before, as the analysis of the whole text
// numbers them. A span of a sentence already added (a later block of it)
// adds nothing.
func (al *alignment) addSpan(sp *engine.Span) error {
	t := al.spoken
	if sp.Sentence <= t.last {
		return nil
	}
	text := []rune(sp.Text)
	if sp.Start < 0 || sp.End-sp.Start != len(text) {
		return &engine.InputError{Reason: fmt.Sprintf("sentence %d's span [%d, %d) does not hold its %d characters", sp.Sentence, sp.Start, sp.End, len(text))}
	}
	words, err := transcript(sp.Text, al.a.opts.Voice)
	if err != nil {
		return err
	}
	for len(t.runes) < sp.End {
		t.runes = append(t.runes, ' ') // between sentences: no word's
	}
	copy(t.runes[sp.Start:], text)
	base := t.tokens
	for i := range words {
		w := &words[i]
		w.charStart += sp.Start
		w.charEnd += sp.Start
		w.token += base
		w.sentence = len(al.groups)
		t.tokens = max(t.tokens, w.token+1)
	}
	t.last = sp.Sentence
	al.words = append(al.words, words...)
	al.groups = append(al.groups, words)
	al.input = string(t.runes)
	return nil
}

// fallback sets the transcript of audio that carried no span: the
// request's whole text, once it has all arrived. Without it, there is no
// transcript, which is bad input.
func (t *spokenText) fallback(al *alignment) error {
	if t.feed == nil {
		return &engine.InputError{Reason: "no transcript: the text is empty, and the audio carries no sentence spans"}
	}
	text, _ := t.feed.Text() // complete: the audio has ended
	words, err := transcript(text, al.a.opts.Voice)
	if err != nil {
		return err
	}
	al.input, al.words, al.groups = text, words, bySentence(words)
	return nil
}
