package api

// split_granularity, vLLM-Omni's timestamps in audio.chunk events, and
// the timestamps of mp3 and aac moved by their lead.

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestSpeechStreamSplitNone: with split_granularity none nothing is
// spoken before input.done, then the utterance is one unit: one
// audio.start with the whole text, the audio of every sentence, the words
// of all as sentence 0, and a session.done of one sentence.
func TestSpeechStreamSplitNone(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true, "word_timestamps", true, "split_granularity", "none")
	const text = "First one here. And the second."
	c.event(evText, "text", "First one here. ")
	c.event(evText, "text", "And the second.")
	time.Sleep(300 * time.Millisecond) // nothing comes meanwhile: the error event is the next message
	c.event("input.nothing")
	wantErrorEvent(t, c.recv(), "bad_request", "unknown event type")
	c.event(evDone)
	h := c.utterance()
	_, pcm := liveExpected(text)
	var done wsSessionDone
	h.end.decode(t, &done)
	if len(h.starts) != 1 || h.starts[0].SentenceText != text || h.starts[0].SentenceIndex != 0 || done.TotalSentences != 1 {
		t.Fatalf("units %+v, session.done %s", h.starts, h.end.raw)
	}
	if !bytes.Equal(h.audio(), bytes.Join(pcm, nil)) {
		t.Errorf("%d bytes of audio, want the %d of both sentences", len(h.audio()), len(bytes.Join(pcm, nil)))
	}
	if len(h.allWords()) != 6 {
		t.Errorf("words %+v", h.allWords())
	}
	for _, w := range h.words {
		if w.SentenceIndex != 0 {
			t.Errorf("words of sentence %d", w.SentenceIndex)
		}
	}
}

// chunkEvent is an audio.chunk as a client decodes it.
type chunkEvent struct {
	wsAudioChunk
	Timestamps *[]chunkWord `json:"timestamps"`
}

// TestSpeechStreamChunks: a session that asks (by the URL, as vLLM-Omni's
// own client cannot send a field of ours) gets its audio and timestamps
// vLLM-Omni's way: per sentence, in order, audio.start (word_timestamps
// true), audio.chunk events of base64 PCM placed from the sentence's
// start, an audio.chunk of no audio with the sentence's words from its
// start, audio.done; the same audio and words as omnistage's form.
func TestSpeechStreamChunks(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	const text = "First one here. And the second, longer one."
	_, pcm := liveExpected(text)
	ours := dialWS(t, f.url, nil)
	ours.event(evConfig, "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
	ours.event(evText, "text", text)
	ours.event(evDone)
	want := ours.utterance()

	c := dialQuery(t, f.url, "word_timestamps_form=audio.chunk")
	c.event(evConfig, "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
	c.event(evText, "text", text)
	c.event(evDone)
	msgs := c.until(evSessionDone)
	sentence, offsetMs := -1, 0
	var audio [][]byte
	var got []engine.Word
	for _, m := range msgs {
		switch m.typ {
		case evAudioStart:
			var s wsAudioStart
			m.decode(t, &s)
			if s.SentenceIndex != sentence+1 || !s.WordTimestamps || s.SampleRate != 16000 {
				t.Fatalf("audio.start %s after sentence %d", m.raw, sentence)
			}
			sentence++
			audio = append(audio, nil)
		case evAudioChunk:
			var ch chunkEvent
			m.decode(t, &ch)
			if ch.SentenceIndex != sentence || ch.Timestamps != nil && len(ch.AudioB64) > 0 || ch.Timestamps == nil && len(ch.AudioB64) == 0 {
				t.Fatalf("audio.chunk %.200s in sentence %d", m.raw, sentence)
			}
			if ch.Timestamps == nil {
				if ch.ChunkStartMs != len(audio[sentence])*1000/32000 {
					t.Errorf("chunk at %d ms of sentence %d, after %d bytes", ch.ChunkStartMs, sentence, len(audio[sentence]))
				}
				audio[sentence] = append(audio[sentence], ch.AudioB64...)
				continue
			}
			for _, w := range *ch.Timestamps {
				got = append(got, engine.Word{Word: w.Word, StartMs: w.StartMs + offsetMs, EndMs: w.EndMs + offsetMs})
			}
			offsetMs += len(audio[sentence]) * 1000 / 32000
		case evAudioDone, evSessionDone:
		default:
			t.Fatalf("unexpected %s", m.raw)
		}
	}
	if len(audio) != 2 || !bytes.Equal(audio[0], pcm[0]) || !bytes.Equal(audio[1], pcm[1]) {
		t.Errorf("%d sentences of audio, not the sentences'", len(audio))
	}
	var wantWords []engine.Word
	for _, w := range want.allWords() {
		wantWords = append(wantWords, engine.Word{Word: w.Word, StartMs: w.StartMs, EndMs: w.EndMs})
	}
	if !reflect.DeepEqual(got, wantWords) {
		t.Errorf("words\n%+v\nwant\n%+v", got, wantWords)
	}
	// A bad form in the URL is refused at the handshake.
	_, resp, err := websocket.Dial(context.Background(), wsURL(f.url)+"?word_timestamps_form=json", nil)
	if err == nil || resp == nil || resp.StatusCode != 400 {
		t.Errorf("word_timestamps_form=json: %v", err)
	}
}

// dialQuery opens a session at base with the query string query.
func dialQuery(t *testing.T, base, query string) *wsClient {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), wsURL(base)+"?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(-1)
	return &wsClient{t: t, conn: c}
}

// TestSpeechStreamLead: mp3's and aac's word timestamps come moved by the
// format's lead (as HTTP moves them), so that they match the audio a
// player plays.
func TestSpeechStreamLead(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	const text = "First one here. And the second."
	words := func(format string) []engine.Word {
		c := dialWS(t, f.url, nil)
		c.event(evConfig, "response_format", format, "stream_audio", true, "word_timestamps", true)
		c.event(evText, "text", text)
		c.event(evDone)
		return c.utterance().allWords()
	}
	base := words("pcm")
	for _, format := range []string{"mp3", "aac"} {
		lead := leadMs(format, 16000, true)
		got := words(format)
		if lead == 0 || !reflect.DeepEqual(got, shiftWords(base, lead)) {
			t.Errorf("%s (lead %d ms): words\n%+v\nwant those of pcm moved\n%+v", format, lead, got, base)
		}
	}
}
