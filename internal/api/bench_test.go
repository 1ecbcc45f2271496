package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

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
