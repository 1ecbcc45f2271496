package stageserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// oneShotBench ends in two pass-through audio stages: a one-shot call of
// stage 1 takes a payload of audio and answers with a payload of the same
// audio for stage 2 (a hand-off), one of stage 2 with the audio as WAV in
// JSON (the final answer).
const oneShotBench = `
pipeline:
  name: oneshot
  input: text
  stages:
    - {id: 0, name: source, engine: test-a, input: text,  output: audio}
    - {id: 1, name: pass1,  engine: test-b, input: audio, output: audio, final_output: true}
    - {id: 2, name: pass2,  engine: test-c, input: audio, output: audio, final_output: true}
deploy:
  stages:
    - {id: 1, max_inflight: 64, options: {passthrough: true}}
    - {id: 2, max_inflight: 64, options: {passthrough: true}}
`

// BenchmarkOneShot measures one one-shot /v1/run call of 1 s and 10 s of
// 16 kHz audio over loopback on a signed stage server (read the body,
// decode and check the payload, run a pass-through stage, write the
// answer) against a bare net/http handler that reads a body of the same
// size and writes it back ("echo"). "handoff" calls stage 1, which answers
// with the next payload, "final" stage 2, which answers with the audio in
// JSON; ns/call, ns/echo and their ratio call/echo are reported.
//
// Each iteration is a round of calls and then as many echoes, so that both
// see the same machine. The rounds are long because the servers and the
// client share one process: a call made right after an echo pays for the
// echo's garbage and cold caches (1 s hand-offs alternated one by one cost
// 1.2-1.4x the echo, against 1.0x in rounds of 32, and a call after an
// echo of an empty body is faster than either), while a stage server
// serves its calls back to back.
func BenchmarkOneShot(b *testing.B) {
	cfg := testkit.Parse(b, oneShotBench)
	codec := payload.NewCodec([]byte("one-shot-benchmark-key-0123456789"))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	}))
	b.Cleanup(echo.Close)
	for _, seconds := range []int{1, 10} {
		samples := make([]int16, 16000*seconds)
		for i := range samples {
			samples[i] = int16(i * 37)
		}
		for _, stage := range []int{1, 2} {
			srv := apitest.Start(b, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{Stage: &stage, Codec: codec})
			in, err := codec.Encode(&payload.Envelope{Pipeline: cfg.Pipeline.Name, Digest: cfg.Digest(), TransferID: "t", RequestID: "r",
				From: stage - 1, To: stage, Final: 2, Params: make([]json.RawMessage, 3), Outputs: []string{"audio"},
				Data: []engine.Chunk{{Audio: &engine.Audio{SampleRate: 16000, Samples: samples}}}})
			if err != nil {
				b.Fatal(err)
			}
			body, _ := json.Marshal(map[string]any{"stage_id": stage, "stage_input": in})
			name := map[int]string{1: "handoff", 2: "final"}[stage]
			b.Run(fmt.Sprintf("audio=%ds/%s", seconds, name), func(b *testing.B) {
				const round = 32
				var call, bare time.Duration
				for b.Loop() {
					start := time.Now()
					for range round {
						post(b, client, srv.URL+"/v1/run", body)
					}
					mid := time.Now()
					for range round {
						post(b, client, echo.URL, body)
					}
					call, bare = call+mid.Sub(start), bare+time.Since(mid)
				}
				b.ReportMetric(float64(call.Nanoseconds())/float64(b.N*round), "ns/call")
				b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N*round), "ns/echo")
				b.ReportMetric(float64(call)/float64(bare), "call/echo")
			})
		}
	}
}

// post posts body to url and reads the answer, which must be a 200.
func post(b *testing.B, c *http.Client, url string, body []byte) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
}
