package api

// WS /v1/audio/speech/stream over the fake live pipeline: sentences as
// they complete, with their texts, audio and word timestamps.

import (
	"bytes"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
)

// liveExpected is the fake live pipeline's audio of each sentence of text,
// as the client gets it in pcm.
func liveExpected(text string) (sentences []string, pcm [][]byte) {
	spans, _ := liveSentences(text, 0, true)
	rs := []rune(text)
	for _, sp := range spans {
		s := rs[sp[0]:sp[1]]
		params := make([]float32, len(s))
		for i, r := range s {
			params[i] = float32(r)
		}
		sentences = append(sentences, string(s))
		pcm = append(pcm, audio.AppendPCMBytes(nil, liveAudio(params)))
	}
	return sentences, pcm
}

// TestSpeechStreamSentences: each sentence is spoken as soon as the next
// one begins, before input.done; its audio.start names it and its text as
// sent; the audio is the pipeline's, word timestamps come per sentence
// with offsets into the utterance's text, and session.done counts it all.
func TestSpeechStreamSentences(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
	const text = "Héllo 😀 there.  How are you? Fine"
	want, pcm := liveExpected(text)
	// Word by word: the first sentence's audio begins once "How" came.
	for _, piece := range []string{"Héllo", " 😀 ", "there.", "  H"} {
		c.event(evText, "text", piece)
	}
	first := c.until(evAudioStart)
	var s0 wsAudioStart
	first[len(first)-1].decode(t, &s0)
	if s0.SentenceIndex != 0 || s0.SentenceText != want[0] || s0.Format != "pcm" || s0.SampleRate != fakeRate || s0.UtteranceIndex != 0 || s0.RequestID == "" {
		t.Errorf("first audio.start %+v; want sentence 0 %q at %d Hz", s0, want[0], fakeRate)
	}
	for _, piece := range []string{"ow are", " you? ", "Fine"} {
		c.event(evText, "text", piece)
	}
	c.event(evDone)
	h := c.utterance(first...)
	var done wsSessionDone
	h.end.decode(t, &done)
	if h.end.typ != evSessionDone || done.TotalSentences != 3 || done.UtteranceIndex != 0 {
		t.Fatalf("the utterance ended with %s; want session.done of 3 sentences", h.end.raw)
	}
	var texts []string
	for _, s := range h.starts {
		texts = append(texts, s.SentenceText)
	}
	if !slices.Equal(texts, want) {
		t.Errorf("sentences %q, want %q", texts, want)
	}
	if !slices.EqualFunc(h.sentences, pcm, bytes.Equal) {
		t.Errorf("the sentences' audio (%d bytes) is not the pipeline's (%d bytes)", len(h.audio()), len(bytes.Join(pcm, nil)))
	}
	if done.TotalBytes != int64(len(bytes.Join(pcm, nil))) {
		t.Errorf("session.done says %d bytes, want %d", done.TotalBytes, len(bytes.Join(pcm, nil)))
	}
	// Word timestamps: each sentence's, its words as sliced from the text.
	rs := []rune(text)
	var words []string
	for _, ev := range h.words {
		for _, w := range ev.Words {
			if string(rs[w.CharStart:w.CharEnd]) != w.Word {
				t.Errorf("word %+v is not text[%d:%d] = %q", w, w.CharStart, w.CharEnd, string(rs[w.CharStart:w.CharEnd]))
			}
			words = append(words, w.Word)
		}
	}
	if want := []string{"Héllo", "😀", "there", "How", "are", "you", "Fine"}; !slices.Equal(words, want) {
		t.Errorf("words %q, want %q", words, want)
	}
}
