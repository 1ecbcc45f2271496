package api

// The ElevenLabs streaming-input protocol itself, with a client of its
// own: contexts side by side, their isFinal, close_socket, stream-input,
// the API key in xi-api-key, and the refusals.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/omnistage/omnistage/internal/audio"
)

// elMsg is a server message as a client reads it.
type elMsg struct {
	Audio     []byte       `json:"audio"`
	IsFinal   *bool        `json:"isFinal"`
	Alignment *elAlignment `json:"alignment"`
	ContextID *string      `json:"contextId"`
	Error     string       `json:"error"`
	Message   string       `json:"message"`
}

// dialEL opens an ElevenLabs streaming-input WebSocket at path?query of
// the server at base, with hdr.
func dialEL(t testing.TB, base, path string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+path, &websocket.DialOptions{HTTPHeader: hdr})
	if err == nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, resp, err
}

func elSend(t testing.TB, c *websocket.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := c.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func elRecv(t testing.TB, c *websocket.Conn) (elMsg, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		return elMsg{}, err
	}
	var m elMsg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m, nil
}

// TestElevenLabsContexts: two contexts of one connection speak side by
// side, each its own audio (the pcm of its text, as posted whole) and
// alignment (the characters of its text), then its isFinal; close_socket
// ends the connection once they are done.
func TestElevenLabsContexts(t *testing.T) {
	f := newFixture(t, setup{yaml: liveWideYAML, engines: liveEngines(nil)})
	c, _, err := dialEL(t, f.url, "/v1/text-to-speech/slt/multi-stream-input?output_format=pcm_16000&model_id=eleven_flash_v2_5", nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"a": "First one here. And more.", "b": "Other text, spoken. Too."}
	for id := range texts {
		elSend(t, c, map[string]any{"text": " ", "context_id": id, "voice_settings": map[string]any{"stability": 0.5, "speed": 1}})
	}
	for _, id := range []string{"a", "b"} {
		first, rest, _ := strings.Cut(texts[id], " ")
		elSend(t, c, map[string]any{"text": first + " ", "context_id": id})
		elSend(t, c, map[string]any{"text": rest + " ", "context_id": id, "flush": true})
	}
	for id := range texts {
		elSend(t, c, map[string]any{"context_id": id, "close_context": true})
	}
	elSend(t, c, map[string]any{"close_socket": true})
	pcm, chars, finals := map[string][]byte{}, map[string]string{}, 0
	for {
		m, err := elRecv(t, c)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("the connection ended with %v", err)
			}
			break
		}
		if m.Error != "" || m.ContextID == nil {
			t.Fatalf("message %+v", m)
		}
		id := *m.ContextID
		pcm[id] = append(pcm[id], m.Audio...)
		if m.Alignment != nil {
			chars[id] += strings.Join(m.Alignment.Chars, "")
		}
		if m.IsFinal != nil && *m.IsFinal {
			finals++
		}
	}
	if finals != 2 {
		t.Errorf("%d isFinal, want 2", finals)
	}
	for id, text := range texts {
		_, want := liveExpected(text)
		if got := pcm[id]; !slices.Equal(got, slices.Concat(want...)) {
			t.Errorf("context %s: %d bytes of audio, its text's is %d", id, len(got), len(slices.Concat(want...)))
		}
		if chars[id] != text {
			t.Errorf("context %s: the alignment's characters %q, want %q", id, chars[id], text)
		}
	}
}

// TestElevenLabsStreamInput: stream-input is one context, unnamed: its
// text, "" to end it, its audio and isFinal, then the connection closes.
func TestElevenLabsStreamInput(t *testing.T) {
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	c, _, err := dialEL(t, f.url, "/v1/text-to-speech/rms/stream-input?output_format=pcm_24000", nil)
	if err != nil {
		t.Fatal(err)
	}
	const text = "Only one here. "
	elSend(t, c, map[string]any{"text": " "})
	elSend(t, c, map[string]any{"text": text, "try_trigger_generation": true})
	elSend(t, c, map[string]any{"text": ""})
	var got []byte
	final := false
	for {
		m, err := elRecv(t, c)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure || !final {
				t.Fatalf("ended with %v, isFinal %v", err, final)
			}
			break
		}
		if m.ContextID != nil || m.Error != "" {
			t.Fatalf("message %+v", m)
		}
		got = append(got, m.Audio...)
		final = final || m.IsFinal != nil && *m.IsFinal
	}
	_, pcm := liveExpected(strings.TrimSpace(text))
	var samples []int16
	for _, p := range pcm {
		for i := 0; i+1 < len(p); i += 2 {
			samples = append(samples, int16(uint16(p[i])|uint16(p[i+1])<<8))
		}
	}
	if want := audio.AppendPCMBytes(nil, audio.Resample(samples, fakeRate, 24000)); !slices.Equal(got, want) {
		t.Errorf("%d bytes, want the %d of the text resampled to 24 kHz", len(got), len(want))
	}
}

// TestElevenLabsAccess: the API key comes in xi-api-key (or as a bearer
// token); the handshake is refused, in the API's error shape, without it,
// for an output format not served, or a bad query.
func TestElevenLabsAccess(t *testing.T) {
	const key = "sk-eleven-0123456789"
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil), opts: Options{APIKey: key}})
	for _, tc := range []struct {
		name, path string
		hdr        http.Header
		status     int
	}{
		{"xi-api-key", "/v1/text-to-speech/slt/multi-stream-input", http.Header{"xi-api-key": {key}}, http.StatusSwitchingProtocols},
		{"bearer", "/v1/text-to-speech/Vivian/stream-input", http.Header{"Authorization": {"Bearer " + key}}, http.StatusSwitchingProtocols},
		{"no key", "/v1/text-to-speech/slt/multi-stream-input", nil, http.StatusUnauthorized},
		{"wrong key", "/v1/text-to-speech/slt/multi-stream-input", http.Header{"xi-api-key": {"sk-no"}}, http.StatusUnauthorized},
		{"bad format", "/v1/text-to-speech/slt/multi-stream-input?output_format=opus_48000_64", http.Header{"xi-api-key": {key}}, http.StatusBadRequest},
		{"bad inactivity", "/v1/text-to-speech/slt/multi-stream-input?inactivity_timeout=999", http.Header{"xi-api-key": {key}}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, err := dialEL(t, f.url, tc.path, tc.hdr)
			if resp == nil || resp.StatusCode != tc.status {
				t.Errorf("status %v (%v), want %d", resp, err, tc.status)
			}
		})
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/text-to-speech/slt/stream?output_format=pcm_16000",
		map[string]any{"text": "Whole text here.", "model_id": "eleven_turbo_v2_5", "voice_settings": map[string]any{"stability": 0.3}}, "xi-api-key", key)
	if _, pcm := liveExpected("Whole text here."); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "audio/pcm" || !slices.Equal(body, slices.Concat(pcm...)) {
		t.Errorf("POST .../stream: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	resp, body = f.do(context.Background(), http.MethodGet, "/v1/voices", nil, "xi-api-key", key)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"voice_id":"alloy"`) || !strings.Contains(string(body), `"voice_id":"vivian"`) {
		t.Errorf("GET /v1/voices: %d %s", resp.StatusCode, body)
	}
}
