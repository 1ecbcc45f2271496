package api

// The speech stream's refusals and limits: bad events, bad configurations,
// a failing utterance, buffered text, idle and length limits, big
// messages, a reader that stops reading.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestSpeechStreamRefusals: each bad event gets an error event with its
// code, and the session goes on; session.config is sticky, refused while
// an utterance takes text, and keeps the one before when bad.
func TestSpeechStreamRefusals(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm")
	for _, tc := range []struct {
		name string
		send func()
		code string
		msg  string
	}{
		{"not JSON", func() { c.sendRaw(websocket.MessageText, []byte("{oops")) }, "invalid_json", "the event is not valid JSON"},
		{"not an object", func() { c.sendRaw(websocket.MessageText, []byte("[1]")) }, "invalid_json", "the event must be a JSON object, not a JSON array"},
		{"data after it", func() { c.sendRaw(websocket.MessageText, []byte(`{"type":"input.done"} {}`)) }, "invalid_json", "the event has data after its JSON value"},
		{"type not a string", func() { c.sendRaw(websocket.MessageText, []byte(`{"text":"x","type":3}`)) }, "invalid_json", "field type: want a string, got a JSON number"},
		{"voice not a string", func() { c.event(evConfig, "voice", 3) }, "invalid_json", "voice"},
		{"binary", func() { c.sendRaw(websocket.MessageBinary, []byte{1, 2}) }, "bad_request", "JSON text message"},
		{"no type", func() { c.send(map[string]any{"text": "x"}) }, "bad_request", "has no type"},
		{"unknown type", func() { c.event("input.flush") }, "bad_request", `unknown event type "input.flush"`},
		{"unknown field", func() { c.event(evText, "text", "x", "lang", "en") }, "invalid_json", "lang"},
		{"text missing", func() { c.event(evText) }, "bad_request", "has no text"},
		{"text not a string", func() { c.event(evText, "text", 3) }, "invalid_json", "text"},
		{"done with a field", func() { c.event(evDone, "now", true) }, "invalid_json", "now"},
		{"bad speed", func() { c.event(evConfig, "speed", 9) }, "bad_request", "speed 9 is outside 0.25..4"},
		{"bad format", func() { c.event(evConfig, "response_format", "ogg") }, "bad_request", `response_format "ogg" is not offered here`},
		{"bad split", func() { c.event(evConfig, "split_granularity", "word") }, "bad_request", `split_granularity "word": use sentence, clause, none`},
		{"bad timestamps form", func() { c.event(evConfig, "word_timestamps_form", "x") }, "bad_request", `word_timestamps_form "x": use word_timestamps, audio.chunk`},
		{"chunks need streamed pcm", func() { c.event(evConfig, "word_timestamps", true, "word_timestamps_form", "audio.chunk") }, "bad_request", "rides on streamed pcm"},
		{"unknown model", func() { c.event(evConfig, "model", "nope") }, "model_not_found", `model "nope" is not served here`},
		{"voice cloning", func() { c.event(evConfig, "ref_audio", "a.wav") }, "bad_request", "ref_audio: this server does not clone voices"},
		{"unknown config field", func() { c.event(evConfig, "pitch", 2) }, "invalid_json", "pitch"},
		{"voice and speaker disagree", func() { c.event(evConfig, "voice", "a", "speaker", "b") }, "bad_request", "disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.send()
			m := c.recv()
			wantErrorEvent(t, m, tc.code, tc.msg)
			if strings.Contains(string(m.raw), "request body") || strings.Contains(string(m.raw), "invalid request") ||
				strings.Contains(string(m.raw), "unknown") && !strings.HasPrefix(tc.name, "unknown") && !strings.Contains(tc.name, "with a field") {
				t.Errorf("an event is not a request body, nor a field of the wrong type unknown: %s", m.raw)
			}
		})
	}
	// vLLM-Omni's fields that change nothing here are taken.
	c.event(evConfig, "response_format", "pcm", "split_granularity", "sentence", "language", "English", "instructions", "calm", "seed", 4, "speaker", "slt")
	// The configuration kept is still pcm; one may not change it mid-way.
	c.event(evText, "text", "Hi there.")
	c.event(evConfig, "response_format", "wav")
	wantErrorEvent(t, c.recv(), "bad_request", "cannot change an utterance in progress")
	c.event(evDone)
	h := c.utterance()
	if h.end.typ != evSessionDone || h.starts[0].Format != "pcm" {
		t.Fatalf("utterance: %s, format %+v", h.end.raw, h.starts)
	}
	// Now it may: the next utterance is wav.
	c.event(evConfig, "response_format", "wav")
	c.event(evText, "text", "Hi.")
	c.event(evDone)
	if h := c.utterance(); h.starts[0].Format != "wav" || string(h.sentences[0][:4]) != "RIFF" {
		t.Errorf("after the new session.config: %+v", h.starts)
	}
	// An input.done with nothing said is an utterance of no sentence.
	c.event(evDone)
	var done wsSessionDone
	m := c.recv()
	m.decode(t, &done)
	if m.typ != evSessionDone || done.UtteranceIndex != 2 || done.TotalSentences != 0 {
		t.Errorf("an empty utterance: %s", m.raw)
	}
}

// TestSpeechStreamConfigFirst: a session closes (1008) when its first
// event is not session.config, or is a bad one, as vLLM-Omni's does.
func TestSpeechStreamConfigFirst(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	for _, tc := range []struct {
		name  string
		first map[string]any
		code  string
		msg   string
	}{
		{"text first", map[string]any{"type": evText, "text": "hi"}, "bad_request", "send session.config first"},
		{"bad config", map[string]any{"type": evConfig, "speed": 0}, "bad_request", "speed 0 is outside"},
		{"timestamps without an aligner", map[string]any{"type": evConfig, "model": "nope"}, "model_not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialWS(t, f.url, nil)
			c.send(tc.first)
			wantErrorEvent(t, c.recv(), tc.code, tc.msg)
			if s := c.closed(); s != websocket.StatusPolicyViolation {
				t.Errorf("closed with %d, want 1008", s)
			}
		})
	}
}

// TestSpeechStreamFailure: an utterance whose request fails mid-way ends
// its sentence with audio.done (error true) and an error event with the
// failure's code; its later text is dropped, its input.done answered with
// session.done, and the next utterance is spoken.
func TestSpeechStreamFailure(t *testing.T) {
	fail := &liveHooks{}
	fail.block = func(ctx context.Context, n int) error {
		if n == 1 {
			return &engine.InputError{Reason: "this sentence cannot be vocoded"}
		}
		return nil
	}
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(fail)})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true)
	c.event(evText, "text", "A long first sentence goes here. And")
	msgs := c.until(evError)
	wantErrorEvent(t, msgs[len(msgs)-1], "bad_request", "this sentence cannot be vocoded")
	h := &heardUtterance{}
	for _, m := range msgs[:len(msgs)-1] {
		h.add(t, m)
	}
	if len(h.dones) != 1 || !h.dones[0].Error || h.dones[0].TotalBytes != 2*liveBlock {
		t.Errorf("the sentence cut short ended with %+v", h.dones)
	}
	c.event(evText, "text", " more text, dropped.")
	c.event(evDone)
	var done wsSessionDone
	m := c.recv()
	m.decode(t, &done)
	if m.typ != evSessionDone || done.TotalSentences != 1 {
		t.Errorf("the failed utterance ended with %s", m.raw)
	}
	fail.block = nil
	c.event(evText, "text", "Fine now.")
	c.event(evDone)
	if h := c.utterance(); h.end.typ != evSessionDone || len(h.starts) != 1 {
		t.Errorf("the next utterance: %s", h.end.raw)
	}
}

// TestSpeechStreamLimits: text waiting past the bound is refused
// (input_too_large) while the rest is spoken; a session with no event for
// the idle timeout, or older than its length limit, ends with
// session_timeout; a message past the bound closes it with 1009.
func TestSpeechStreamLimits(t *testing.T) {
	g := newGate() // the talker takes no text until it opens
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(&liveHooks{recv: g.wait}),
		opts: Options{SpeechStream: SpeechStreamLimits{MaxText: 100, MaxMessage: 1000}}})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm")
	// The text waits for the talker: up to 100 bytes.
	c.event(evText, "text", "One sentence. Two ")
	c.event(evText, "text", strings.Repeat("x", 60))
	c.event(evText, "text", strings.Repeat("y", 60))
	wantErrorEvent(t, c.recv(), "input_too_large", "138 bytes of text would wait to be spoken, more than the session's limit of 100")
	g.open()
	c.event(evDone)
	h := c.utterance()
	if h.end.typ != evSessionDone || !strings.Contains(h.starts[len(h.starts)-1].SentenceText, "xxx") || strings.Contains(h.starts[len(h.starts)-1].SentenceText, "y") {
		t.Errorf("the utterance: %+v", h.starts)
	}
	big := strings.Repeat("z", 1000)
	c.event(evText, "text", big)
	if s := c.closed(evError); s != websocket.StatusMessageTooBig {
		t.Errorf("a message of %d bytes closed the session with %d, want 1009", len(big)+30, s)
	}

	for _, tc := range []struct {
		name   string
		limits SpeechStreamLimits
		msg    string
	}{
		{"idle", SpeechStreamLimits{Idle: 50 * time.Millisecond}, "no event came for 50ms"},
		{"length", SpeechStreamLimits{MaxLength: 50 * time.Millisecond}, "length limit of 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil), opts: Options{SpeechStream: tc.limits}})
			c := dialWS(t, f.url, nil)
			c.event(evConfig, "response_format", "pcm")
			wantErrorEvent(t, c.recv(), "session_timeout", tc.msg)
			if s := c.closed(); s != websocket.StatusPolicyViolation {
				t.Errorf("closed with %d, want 1008", s)
			}
		})
	}
}

// TestSpeechStreamSlowReader: a client that stops reading holds the
// pipeline back (the vocoder makes a bounded number of blocks more), and
// one that does not read within the write timeout is cut off, its stages
// freed.
func TestSpeechStreamSlowReader(t *testing.T) {
	h := &liveHooks{}
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(h), opts: Options{ChunkWriteTimeout: 2 * time.Second}})
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true)
	// 40 sentences of 1.9 MB of audio (1200 blocks) each: 77 MB, far more
	// than the sockets buffer.
	sentence := strings.Repeat("a", 5998) + ". "
	for range 4 {
		c.event(evText, "text", strings.Repeat(sentence, 10))
	}
	c.event(evDone)
	c.recv() // audio.start: the audio flows, and the client reads no more
	// The vocoder stops once the sockets, the stream buffer and one
	// message are full.
	var last int64 = -1
	for n := h.blocks.Load(); n != last; n = h.blocks.Load() {
		last = n
		time.Sleep(300 * time.Millisecond)
	}
	if last >= 24000 {
		t.Errorf("the vocoder made %d of 48000 blocks for a client that reads nothing", last)
	}
	t.Logf("the vocoder stopped after %d blocks (%d MB of audio)", last, last*liveBlock*2>>20)
	waitReleased(t, f)
	_, err := c.tryRecvAll()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the stalled client's connection: %v, want it cut", err)
	}
}

// tryRecvAll reads until the connection fails, and returns the bytes read.
func (c *wsClient) tryRecvAll() (int, error) {
	n := 0
	for {
		m, err := c.tryRecv()
		if err != nil {
			return n, err
		}
		n += len(m.audio) + len(m.raw)
	}
}
