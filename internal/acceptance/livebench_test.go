package acceptance

// The latency of a live sentence through each placement. Run it with
//
//	go test -run '^$' -bench LiveSentence -benchtime 40x ./internal/acceptance/

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// liveSentence is the sentence the benchmark speaks.
const liveSentence = "The quick brown fox jumps over the lazy dog."

// BenchmarkLiveSentence measures, per iteration and in the same run, for
// the talker, the vocoder and the aligner in process, in worker processes
// and on stage servers: over the WebSocket, with word timestamps, the time from the text that completes
// liveSentence (the first word of the next sentence, sent 20 ms after it,
// an LLM's pace) to its first audio byte; and, as the baseline, the time
// to first audio of liveSentence posted whole to /v1/audio/speech in
// process. It reports the medians (ms) and each placement's ratio to the
// in-process WebSocket's.
func BenchmarkLiveSentence(b *testing.B) {
	fronts := livePlacements(b)
	names := []string{"in process", "worker", "stage server"}
	sessions := map[string]*liveWS{}
	for _, name := range names {
		sessions[name] = dialLive(b, fronts[name].url)
	}
	body, _ := json.Marshal(map[string]any{"model": "tts", "input": liveSentence, "response_format": "pcm", "stream_format": "audio"})
	took := map[string][]time.Duration{}
	for b.Loop() {
		start := time.Now()
		resp, err := http.Post(fronts["in process"].url+"/v1/audio/speech", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		took["http"] = append(took["http"], time.Since(start))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		for _, name := range names {
			ws := sessions[name]
			ws.send(b, map[string]any{"type": "input.text", "text": liveSentence})
			time.Sleep(20 * time.Millisecond) // the LLM's next token comes
			start := time.Now()
			ws.send(b, map[string]any{"type": "input.text", "text": " And"})
			for typ, _ := ws.recv(b); typ != ""; typ, _ = ws.recv(b) {
			}
			took[name] = append(took[name], time.Since(start))
			ws.send(b, map[string]any{"type": "input.cancel"})
			for typ, _ := ws.recv(b); typ != "audio.cancelled" && typ != "session.done"; typ, _ = ws.recv(b) {
			}
		}
	}
	base := ms(medianOf(took["in process"]))
	b.ReportMetric(ms(medianOf(took["http"])), "http-ttfa-ms")
	b.ReportMetric(base, "inproc-ms")
	b.ReportMetric(ms(medianOf(took["worker"])), "worker-ms")
	b.ReportMetric(ms(medianOf(took["stage server"])), "remote-ms")
	b.ReportMetric(ms(medianOf(took["worker"]))/base, "worker/inproc")
	b.ReportMetric(ms(medianOf(took["stage server"]))/base, "remote/inproc")
}

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
