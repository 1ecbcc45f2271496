package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/payload"
)

// benchYAML ends in two pass-through audio stages, so a /v1/run hop at
// stage 2 takes a payload of audio and answers with a payload of the same
// audio for stage 3.
const benchYAML = `
pipeline:
  name: bench
  input: text
  stages:
    - {id: 0, name: talker,  engine: test-speaker, input: text,   output: frames}
    - {id: 1, name: vocoder, engine: test-synth,   input: frames, output: audio, final_output: true}
    - {id: 2, name: pass1,   engine: test-a,       input: audio,  output: audio, final_output: true}
    - {id: 3, name: pass2,   engine: test-b,       input: audio,  output: audio, final_output: true}
deploy:
  stages:
    - {id: 2, max_inflight: 64, options: {passthrough: true}}
    - {id: 3, max_inflight: 64, options: {passthrough: true}}
`

// noopYAML is two pass-through text stages: the server's own cost.
const noopYAML = `
pipeline:
  name: noop
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
deploy:
  max_inflight: 256
  stages:
    - {id: 0, max_inflight: 256, options: {passthrough: true}}
    - {id: 1, max_inflight: 256, options: {passthrough: true}}
`

func postBytes(b *testing.B, c *http.Client, url string, body []byte) int {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return int(n)
}

// BenchmarkRunHop measures one /v1/run hop over loopback (decode and
// verify the payload, run a pass-through stage, encode the next payload)
// against a bare net/http handler that echoes a body of the same size.
func BenchmarkRunHop(b *testing.B) {
	for _, seconds := range []int{1, 10} {
		for _, signed := range []bool{false, true} {
			f := newFixture(b, setup{yaml: benchYAML})
			if signed {
				f = newFixture(b, setup{yaml: benchYAML, opts: Options{Codec: payload.NewCodec([]byte("0123456789abcdef0123456789abcdef"))}})
			}
			// 10 ms of audio per character: 100 characters a second.
			text := strings.TrimSpace(strings.Repeat("abcdefghi ", 10*seconds))
			input := map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": text}, "output_modalities": []string{"audio"}}
			var body []byte
			for stage := 0; stage < 2; stage++ {
				body, _ = json.Marshal(input)
				var ans struct {
					StageID    int    `json:"stage_id"`
					StageInput string `json:"stage_input"`
				}
				resp, err := f.client.Post(f.url+"/v1/run", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				err = json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				if err != nil || ans.StageInput == "" {
					b.Fatalf("stage %d: %v", stage, err)
				}
				input = map[string]any{"stage_id": ans.StageID, "stage_input": ans.StageInput}
			}
			body, _ = json.Marshal(input)
			name := fmt.Sprintf("audio=%ds/signed=%v", seconds, signed)
			b.Run(name+"/run", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if n := postBytes(b, f.client, f.url+"/v1/run", body); n < len(body) {
						b.Fatalf("answer of %d bytes for a body of %d", n, len(body))
					}
				}
			})
			if signed {
				continue
			}
			echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				data, _ := io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.Write(data)
			}))
			b.Run(name+"/echo", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					postBytes(b, f.client, echo.URL, body)
				}
			})
			echo.Close()
		}
	}
}

// BenchmarkServer measures requests per second through the whole server
// (HTTP, JSON, admission, two pass-through stages) at several client
// concurrencies.
func BenchmarkServer(b *testing.B) {
	f := newFixture(b, setup{yaml: noopYAML})
	body := []byte(`{"input":"a short request"}`)
	for _, conc := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("generate/c=%d", conc), func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			var wg sync.WaitGroup
			per := (b.N + conc - 1) / conc
			for range conc {
				wg.Go(func() {
					for range per {
						postBytes(b, f.client, f.url+"/v1/generate", body)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(per*conc)/time.Since(start).Seconds(), "req/s")
		})
	}
}
