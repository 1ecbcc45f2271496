package api

// Benchmarks of the speech stream on the built-in pipeline (real Flite):
// a sentence's latency against the same sentence posted whole, and
// barge-in. Run them with
//
//	go test -run '^$' -bench SpeechStream -benchtime 40x ./internal/api/

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchSentence is the sentence both sides speak.
const benchSentence = "The quick brown fox jumps over the lazy dog."

// BenchmarkSpeechStreamSentence measures, per iteration and in the same
// run: the time to first audio of benchSentence posted whole to
// /v1/audio/speech (pcm, chunked), and, over the WebSocket, the time from
// the text that completes the sentence (the first characters of the next
// one, which Flite needs to know the sentence ended; or input.done) to
// its first audio byte. Each WebSocket sentence begins its utterance, and
// the LLM's gap of 20 ms before the next token lets the utterance's
// request bind first, as it does while an LLM streams. It reports the
// medians (ms) and their ratios; the target is ws <= 1.1 x http + 5 ms.
func BenchmarkSpeechStreamSentence(b *testing.B) {
	f := realFixture(b, "builtin:tts", "")
	c := dialWS(b, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true)
	body, _ := json.Marshal(map[string]any{"model": "tts", "input": benchSentence, "response_format": "pcm", "stream_format": "audio"})
	var httpT, nextT, doneT []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		resp, err := f.client.Post(f.url+"/v1/audio/speech", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		httpT = append(httpT, time.Since(start))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()

		for _, end := range []string{"next", "done"} {
			c.event(evText, "text", benchSentence)
			time.Sleep(20 * time.Millisecond) // the LLM's next token comes
			start = time.Now()
			if end == "next" {
				c.event(evText, "text", " And")
			} else {
				c.event(evDone)
			}
			for m := c.recv(); m.typ != ""; m = c.recv() {
			}
			took := time.Since(start)
			if end == "next" {
				nextT = append(nextT, took)
				c.event(evCancel)
			} else {
				doneT = append(doneT, took)
			}
			c.until(evCancelled, evSessionDone)
		}
	}
	h, n, d := median(httpT), median(nextT), median(doneT)
	b.ReportMetric(ms(h), "http-ttfa-ms")
	b.ReportMetric(ms(n), "ws-next-ms")
	b.ReportMetric(ms(d), "ws-done-ms")
	b.ReportMetric(ms(n)/ms(h), "ws-next/http")
	b.ReportMetric(ms(d)/ms(h), "ws-done/http")
	b.ReportMetric(ms(max(n, d))-(1.1*ms(h)+5), "ws-minus-target-ms")
}

// BenchmarkSpeechStreamBargeIn measures barge-in: an utterance of several
// sentences is flowing (its third audio message read) when input.cancel
// goes; it reports the medians and the worst, in ms from the cancel, of
// the last audio message received before audio.cancelled (0 when none
// came after the cancel), of audio.cancelled, and of the moment /metrics
// shows every stage released and no request in flight.
func BenchmarkSpeechStreamBargeIn(b *testing.B) {
	f := realFixture(b, "builtin:tts", "")
	c := dialWS(b, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true)
	text := strings.Repeat(benchSentence+" ", 8)
	var lastT, eventT, freeT []time.Duration
	for b.Loop() {
		c.event(evText, "text", text)
		c.event(evDone)
		for n := 0; n < 3; {
			if c.recv().typ == "" {
				n++
			}
		}
		start := time.Now()
		c.event(evCancel)
		var last time.Duration
		for {
			m := c.recv()
			if m.typ == evCancelled {
				eventT = append(eventT, m.at.Sub(start))
				break
			}
			if m.typ == "" && m.at.After(start) {
				last = m.at.Sub(start)
			}
		}
		lastT = append(lastT, last)
		for !released(b, f) {
		}
		freeT = append(freeT, time.Since(start))
	}
	if testing.Verbose() {
		slices.Sort(freeT)
		b.Logf("released: %v", freeT)
	}
	b.ReportMetric(ms(median(lastT)), "last-audio-ms")
	b.ReportMetric(ms(slices.Max(lastT)), "last-audio-max-ms")
	b.ReportMetric(ms(median(eventT)), "cancelled-ms")
	b.ReportMetric(ms(median(freeT)), "released-ms")
	b.ReportMetric(ms(slices.Max(freeT)), "released-max-ms")
}

// released reports whether /metrics shows no stage binding and no request
// in flight.
func released(b testing.TB, f *fixture) bool {
	resp, err := f.client.Get(f.url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if (strings.HasPrefix(l, "omnistage_stage_bindings{") || strings.HasPrefix(l, "omnistage_requests_inflight")) && !strings.HasSuffix(l, " 0") {
			return false
		}
	}
	return true
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
