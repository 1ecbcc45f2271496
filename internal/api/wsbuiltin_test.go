package api

// WS /v1/audio/speech/stream on the built-in pipeline, real Flite and
// PocketSphinx: sentences spoken as they complete, the same audio as the
// text posted whole, barge-in, and a session fed by a simulated LLM.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// liveText is what the built-in tests stream: three sentences, a number
// Flite reads as words, and a character beyond the BMP.
const liveText = "Hello there, this is omnistage. It paid $42.50 for 😀 coffee! Is that fine?"

// liveSentencesWant are liveText's sentences as the talker cuts them.
var liveSentencesWant = []string{"Hello there, this is omnistage.", "It paid $42.50 for 😀 coffee!", "Is that fine?"}

// wholePCM posts text whole to /v1/audio/speech as pcm and returns its
// audio.
func wholePCM(t *testing.T, f *fixture, text string) []byte {
	t.Helper()
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts", "input": text, "response_format": "pcm"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/audio/speech: %d %s", resp.StatusCode, body)
	}
	return body
}

// feedWords sends text to c word by word (each piece a word with the
// white space before it), as an LLM streams its tokens.
func feedWords(c *wsClient, text string) {
	c.t.Helper()
	for _, w := range splitWords(text) {
		c.event(evText, "text", w)
	}
}

// splitWords cuts text before each run of white space.
func splitWords(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	return append(out, text[start:])
}

// TestSpeechStreamBuiltin streams liveText word by word: the first
// sentence's audio begins once the second sentence has begun and before
// input.done, each audio.start names its sentence as sent, and the audio,
// sentence after sentence, is byte for byte that of the text posted whole.
func TestSpeechStreamBuiltin(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	whole := wholePCM(t, f, liveText)
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true)
	first, rest, _ := strings.Cut(liveText, " It")
	feedWords(c, first+" It")
	read := c.until(evAudioStart)
	feedWords(c, rest)
	c.event(evDone)
	h := c.utterance(read...)
	if h.end.typ != evSessionDone {
		t.Fatalf("the utterance ended with %s", h.end.raw)
	}
	var texts []string
	for _, s := range h.starts {
		texts = append(texts, s.SentenceText)
		if s.SampleRate != 16000 || s.Format != "pcm" {
			t.Errorf("audio.start %+v", s)
		}
	}
	if !slices.Equal(texts, liveSentencesWant) {
		t.Errorf("sentences %q, want %q", texts, liveSentencesWant)
	}
	if got := h.audio(); !bytes.Equal(got, whole) {
		t.Errorf("streamed audio: %d bytes; the text posted whole: %d bytes; they differ", len(got), len(whole))
	}
}

// TestSpeechStreamTimestampsBuiltin streams liveText with word timestamps
// to the built-in tts and tts-24k (whose aligner gets the audio
// resampled), checking them against the text posted whole; then it cancels
// an utterance mid-way and checks that the words audio.cancelled says were
// heard end within the audio sent.
func TestSpeechStreamTimestampsBuiltin(t *testing.T) {
	liveTimestamps(t, "tts-24k")
	c := liveTimestamps(t, "tts")

	// Barge-in during the second sentence: the words said heard end in the
	// audio sent, and the first sentence's are among them.
	c.event(evText, "text", liveText)
	c.event(evDone)
	var read []wsMsg
	for starts := 0; starts < 2; {
		m := c.recv()
		read = append(read, m)
		if m.typ == evAudioStart {
			starts++
		}
	}
	c.event(evCancel)
	cut := c.utterance(read...)
	var ev wsCancelled
	cut.end.decode(t, &ev)
	if cut.end.typ != evCancelled || ev.HeardCharEnd < len([]rune(liveSentencesWant[0])) || !strings.HasPrefix(liveText, ev.HeardText) {
		t.Errorf("audio.cancelled %+v", ev)
	}
	for _, w := range ev.Words {
		if w.EndMs > ev.AudioMs {
			t.Errorf("word %+v said heard ends after the %d ms sent", w, ev.AudioMs)
		}
	}
}

// liveTimestamps streams liveText with word timestamps to the built-in
// pipeline model over a new WebSocket session: a word_timestamps event per
// sentence (or more), its words the tokens of the text as sent, and all of
// them the timestamps of the text posted whole. It returns the session.
func liveTimestamps(t *testing.T, model string) *wsClient {
	f := realFixture(t, "builtin:"+model, "")
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
		map[string]any{"model": model, "input": liveText, "response_format": "pcm"}, "X-Word-Timestamps", "true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: POST /v1/audio/speech: %d %s", model, resp.StatusCode, body)
	}
	var whole []engine.Word
	if err := json.Unmarshal([]byte(resp.Header.Get("X-Word-Timestamps")), &whole); err != nil {
		t.Fatal(err)
	}
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "model", model, "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
	feedWords(c, liveText)
	c.event(evDone)
	h := c.utterance()
	if h.end.typ != evSessionDone {
		t.Fatalf("%s: the utterance ended with %s", model, h.end.raw)
	}
	if got := h.allWords(); !reflect.DeepEqual(got, whole) {
		t.Errorf("%s: streamed timestamps\n%+v\nwhole\n%+v", model, got, whole)
	}
	rs := []rune(liveText)
	for _, ev := range h.words {
		for _, w := range ev.Words {
			s := h.starts[ev.SentenceIndex].SentenceText
			if string(rs[w.CharStart:w.CharEnd]) != w.Word || !strings.Contains(s, w.Word) {
				t.Errorf("%s: word %+v of sentence %d (%q)", model, w, ev.SentenceIndex, s)
			}
		}
	}
	return c
}

// TestSpeechStreamSentenceEnds: a sentence whose end is certain (?, !, :
// or a blank line) is spoken as soon as its end arrives, without a next
// word or input.done; one that ends in a full stop once the client has
// been quiet for sentence_quiet_ms (never with 0). Each is the audio of
// the sentence posted whole.
func TestSpeechStreamSentenceEnds(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	for _, tc := range []struct {
		text  string
		quiet int // sentence_quiet_ms; -1: the default
	}{
		{"Is it raining? ", 0},
		{"Stop now! ", 0},
		{"Note: ", 0},
		{"Hello there.\n\n", 0},
		{"Hello there. ", 50},
		{"Hello there.", -1},
	} {
		c := dialWS(t, f.url, nil)
		cfg := []any{"model", "tts", "response_format", "pcm"}
		if tc.quiet >= 0 {
			cfg = append(cfg, "sentence_quiet_ms", tc.quiet)
		}
		c.event(evConfig, cfg...)
		c.event(evText, "text", tc.text)
		var audio []byte
		for _, m := range c.until(evAudioDone) {
			audio = append(audio, m.audio...)
		}
		if want := wholePCM(t, f, strings.TrimSpace(tc.text)); !bytes.Equal(audio, want) {
			t.Errorf("%q: %d bytes of audio before input.done; the sentence posted whole: %d", tc.text, len(audio), len(want))
		}
		c.event(evDone)
		c.until(evSessionDone)
	}

	// With no quiet time, a full stop waits for the next word.
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "sentence_quiet_ms", 0)
	c.event(evText, "text", "Dr. ")
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if _, _, err := c.conn.Read(ctx); err == nil {
		t.Error(`"Dr. " was spoken before its next word`)
	}
}

// TestSpeechStreamChunksBuiltin: vLLM-Omni's form on the built-in
// pipeline: a sentence's timestamps and audio.done come as soon as its
// words are aligned, before the rest of the text is sent, and the words,
// moved by each sentence's start, are those of the text posted whole.
func TestSpeechStreamChunksBuiltin(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
		map[string]any{"model": "tts", "input": liveText, "response_format": "pcm"}, "X-Word-Timestamps", "true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/audio/speech: %d %s", resp.StatusCode, body)
	}
	var whole []engine.Word
	if err := json.Unmarshal([]byte(resp.Header.Get("X-Word-Timestamps")), &whole); err != nil {
		t.Fatal(err)
	}
	c := dialQuery(t, f.url, "word_timestamps_form=audio.chunk")
	c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
	first, rest, _ := strings.Cut(liveText, " It")
	feedWords(c, first+" It")
	msgs := c.until(evAudioDone) // with the rest not sent yet
	feedWords(c, rest)
	c.event(evDone)
	msgs = append(msgs, c.until(evSessionDone)...)
	var got []engine.Word
	offset, sentenceBytes := 0, 0
	for _, m := range msgs {
		if m.typ == evAudioStart {
			sentenceBytes = 0
		}
		if m.typ != evAudioChunk {
			continue
		}
		var ch chunkEvent
		m.decode(t, &ch)
		if ch.Timestamps == nil {
			sentenceBytes += len(ch.AudioB64)
			continue
		}
		for _, w := range *ch.Timestamps {
			got = append(got, engine.Word{Word: w.Word, StartMs: w.StartMs + offset, EndMs: w.EndMs + offset})
		}
		offset += sentenceBytes * 1000 / 32000
	}
	if len(got) != len(whole) {
		t.Fatalf("%d words, want %d", len(got), len(whole))
	}
	for i, w := range whole {
		// Each sentence's times are whole milliseconds from its own start.
		if g := got[i]; g.Word != w.Word || abs(g.StartMs-w.StartMs) > 1 || abs(g.EndMs-w.EndMs) > 1 {
			t.Errorf("word %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestSpeechStreamClauses: with split_granularity clause, a clause is
// spoken as soon as its comma and the space after it arrive, as a
// sentence of its own (the audio of the clause posted whole); "1,000"
// is no clause's end.
func TestSpeechStreamClauses(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "split_granularity", "clause")
	c.event(evText, "text", "It costs 1,000 dollars, ")
	msgs := c.until(evAudioDone)
	var audio []byte
	var start wsAudioStart
	for _, m := range msgs {
		audio = append(audio, m.audio...)
		if m.typ == evAudioStart {
			m.decode(t, &start)
		}
	}
	if start.SentenceText != "It costs 1,000 dollars," {
		t.Errorf("the first unit: %q", start.SentenceText)
	}
	if want := wholePCM(t, f, "It costs 1,000 dollars,"); !bytes.Equal(audio, want) {
		t.Errorf("%d bytes, the clause posted whole %d", len(audio), len(want))
	}
	c.event(evText, "text", "or so")
	c.event(evDone)
	if h := c.utterance(); len(h.starts) != 1 || h.starts[0].SentenceText != "or so" {
		t.Errorf("the rest: %+v", h.starts)
	}
}

func abs(n int) int { return max(n, -n) }
