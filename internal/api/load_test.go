package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/omnistage/omnistage/internal/apijson"
)

// TestLoadWithAborts sends concurrent streamed requests over loopback,
// aborting some by DELETE (then reusing the id at once) and dropping others
// mid-stream, and checks that every completed response is intact and that
// the server holds nothing afterwards.
func TestLoadWithAborts(t *testing.T) {
	requests := 240
	if testing.Short() {
		requests = 60
	}
	f := newFixture(t, setup{yaml: fmt.Sprintf(textYAML, "5s")})
	const workers = 8
	var completed, deleted, dropped, conflicts atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := w; i < requests; i += workers {
				id := fmt.Sprintf("w%d-%d", w, rng.IntN(2))
				marker := fmt.Sprintf("q%dx", i)
				words := 1 + rng.IntN(30)
				input := strings.TrimSpace(strings.Repeat(marker+" ", words))
				mode := rng.IntN(3) // 0: read all, 1: DELETE mid-stream, 2: hang up mid-stream
				ctx, cancel := context.WithCancel(context.Background())
				resp, err := f.send(ctx, http.MethodPost, "/v1/generate", map[string]any{"input": input, "stream": "ndjson", "request_id": id})
				if err != nil {
					cancel()
					t.Errorf("post: %v", err)
					return
				}
				if resp.StatusCode == http.StatusConflict {
					conflicts.Add(1) // the id's previous request is still draining
					resp.Body.Close()
					cancel()
					continue
				}
				if resp.StatusCode == 499 {
					// A late DELETE meant for the id's previous request
					// aborted this one before its first output: abort by id.
					deleted.Add(1)
					resp.Body.Close()
					cancel()
					continue
				}
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
					resp.Body.Close()
					cancel()
					return
				}
				sc := bufio.NewScanner(resp.Body)
				n, cut := 0, 1+rng.IntN(words+1)
				var last apijson.Event
				for sc.Scan() {
					var ev apijson.Event
					if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
						t.Errorf("event %q: %v", sc.Bytes(), err)
						break
					}
					last = ev
					if ev.Type == apijson.EventOutput {
						if !strings.HasPrefix(ev.Text, marker+"|") {
							t.Errorf("request %s (%s) got %q", id, marker, ev.Text)
						}
						n++
					}
					if n == cut && mode == 1 {
						go func() {
							dreq, _ := http.NewRequest(http.MethodDelete, f.url+"/v1/requests/"+id, nil)
							if r, err := f.client.Do(dreq); err == nil {
								r.Body.Close()
							}
						}()
					}
					if n == cut && mode == 2 {
						break
					}
				}
				resp.Body.Close()
				cancel()
				switch {
				case mode == 2 && n == cut:
					dropped.Add(1)
				case last.Type == apijson.EventDone:
					if n != words {
						t.Errorf("request %s completed with %d of %d outputs", id, n, words)
					}
					completed.Add(1)
				case last.Type == apijson.EventError && last.Error != nil && last.Error.Code == "aborted":
					deleted.Add(1)
				default:
					t.Errorf("request %s ended with %+v", id, last)
				}
			}
		}()
	}
	wg.Wait()
	testkit.Eventually(t, "server idle", func() bool {
		st := f.orch.Stats()
		return st.InFlight == 0 && st.Bindings() == 0
	})
	t.Logf("completed %d, deleted %d, dropped %d, conflicts %d", completed.Load(), deleted.Load(), dropped.Load(), conflicts.Load())
	if completed.Load() == 0 || deleted.Load()+dropped.Load() == 0 {
		t.Error("the load did not exercise both completion and abort")
	}
}
