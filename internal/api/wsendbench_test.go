package api

// The latency of a finished sentence over the speech stream, against the
// same sentence posted whole. Run it with
//
//	go test -run '^$' -bench SentenceEnd -benchtime 20x -count 6 ./internal/api/

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// BenchmarkSentenceEnd measures, interleaved in each iteration, for a
// sentence ending in ?, ! and .: the time to first audio of the sentence
// posted whole (pcm, chunked), and over the WebSocket the time from its
// last piece (its last word, its mark and a space, after the rest of it
// 20 ms before, as an LLM streams) to its first audio, with no next word
// and no input.done: at once for ? and !, after sentence_quiet_ms for a
// full stop. It reports the medians (ms) and ws/http, for the full stop
// with the quiet time taken off; the goal is ws <= 1.1 x http + 5 ms. A
// control, exclaim-idle, sends the ! sentence's last piece after the
// quiet time: what a wait that long costs by itself.
func BenchmarkSentenceEnd(b *testing.B) {
	f := realFixture(b, "builtin:tts", "")
	c := dialWS(b, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true)
	quiet := engine.DefaultSentenceQuiet
	ends := []struct {
		name, text string
		gap        time.Duration // between the sentence's two pieces
	}{
		{"question", "Is the quick brown fox jumping over the lazy dog?", 20 * time.Millisecond},
		{"exclaim", "The quick brown fox jumps over the lazy dog!", 20 * time.Millisecond},
		{"stop", "The quick brown fox jumps over the lazy dog.", 20 * time.Millisecond},
		// A control: the ! sentence's last piece after the client was
		// quiet as long as a full stop waits, to tell the cost of the
		// wait itself (a machine idle that long) from the full stop's.
		{"exclaim-idle", "The quick brown fox jumps over the lazy dog!", quiet},
	}
	httpT := make([][]time.Duration, len(ends))
	wsT := make([][]time.Duration, len(ends))
	for b.Loop() {
		for i, e := range ends {
			body, _ := json.Marshal(map[string]any{"model": "tts", "input": e.text, "response_format": "pcm", "stream_format": "audio"})
			start := time.Now()
			resp, err := f.client.Post(f.url+"/v1/audio/speech", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
				b.Fatal(err)
			}
			httpT[i] = append(httpT[i], time.Since(start))
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()

			cut := strings.LastIndex(e.text, " ")
			c.event(evText, "text", e.text[:cut])
			time.Sleep(e.gap)
			start = time.Now()
			c.event(evText, "text", e.text[cut:]+" ")
			for m := c.recv(); m.typ != ""; m = c.recv() {
			}
			wsT[i] = append(wsT[i], time.Since(start))
			c.event(evDone)
			c.until(evSessionDone)
		}
	}
	for i, e := range ends {
		h, w := median(httpT[i]), median(wsT[i])
		b.ReportMetric(ms(h), e.name+"-http-ms")
		b.ReportMetric(ms(w), e.name+"-ws-ms")
		if e.name == "stop" {
			w -= quiet
		}
		b.ReportMetric(ms(w)/ms(h), e.name+"-ws/http")
	}
}
