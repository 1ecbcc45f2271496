package hop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestBodyBudget: the JSON bodies of calls in progress hold at most the
// server's budget for them (4 of the largest bodies' length), counted by
// what they hold, their decoded payloads (three quarters of a body, so
// five fit, with 5 % to spare, and a sixth would need 14 % more); one more
// waits, and is refused as overloaded once the body read timeout passes.
// When the calls end, their memory is free again.
func TestBodyBudget(t *testing.T) {
	cfg := testkit.Parse(t, strings.Replace(hoptest.TextPipeline, "    - {id: 0, options: {chunks: 2}}", "    - {id: 0, options: {chunks: 2}}\n    - {id: 1, max_inflight: 8}", 1))
	hand := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{})
	// A payload for stage 1 of about 6 MB, an 8 MB body.
	first, _ := json.Marshal(hoptest.Prompt(strings.Repeat("many words here ", 3<<16)))
	answer, err := http.Post(hand.URL+"/v1/run", "application/json", bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	var resp hop.RunResponse
	err = json.NewDecoder(answer.Body).Decode(&resp)
	answer.Body.Close()
	if err != nil || answer.StatusCode != http.StatusOK || resp.Finished || resp.StageInput == "" {
		t.Fatalf("stage 0's answer: %d, finished %v, %d bytes of stage_input, %v", answer.StatusCode, resp.Finished, len(resp.StageInput), err)
	}
	body, _ := json.Marshal(resp)

	release := make(chan struct{})
	var mu sync.Mutex
	started := 0
	hooks := &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if job.StageID == 1 && job.RequestID != "big-frame" {
			mu.Lock()
			started++
			mu.Unlock()
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	one := 1
	srv := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(hooks)}, api.Options{
		Stage: &one, MaxRunBody: int64(len(body)) + 1024, BodyReadTimeout: 2 * time.Second,
	})
	// A call that is not refused waits for release: the client gives up
	// on it rather than the test hanging.
	client := &http.Client{Timeout: 20 * time.Second}
	post := func() (int, string) {
		resp, err := client.Post(srv.URL+"/v1/run", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 5)
	for i := range statuses {
		wg.Go(func() { statuses[i], _ = post() })
	}
	testkit.Eventually(t, "five calls running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return started == len(statuses)
	})
	status, msg := post()
	if status != http.StatusServiceUnavailable || !strings.Contains(msg, "overloaded") || !strings.Contains(msg, "/v1/run bodies") {
		t.Errorf("a sixth body: %d %s, want 503 overloaded", status, msg)
	}
	// A streamed call's big frame needs the same memory: refused alike,
	// in the answer's error frame.
	caller, err := hop.NewCaller(cfg, 1, &hop.Client{}, payload.NewCodec(nil))
	if err != nil {
		t.Fatal(err)
	}
	big := engine.Chunk{Text: &engine.Text{Text: strings.Repeat("x", 4<<20)}} // more than the five leave
	err = caller.Call(context.Background(), srv.URL, &engine.Job{RequestID: "big-frame", StageID: 1, In: engine.NewSliceSource(big), Out: &engine.SliceSink{}})
	var he *hop.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.Code != "overloaded" || !strings.Contains(he.Message, "/v1/run frames") {
		t.Errorf("a streamed call with a big frame: %v, want 503 overloaded", err)
	}
	close(release)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("call %d: %d", i, s)
		}
	}
	if status, msg := post(); status != http.StatusOK {
		t.Errorf("after the calls ended: %d %s", status, msg)
	}
}

// idleRecorder records the Busy and Idle calls it hears.
type idleRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *idleRecorder) Busy() { r.mu.Lock(); r.calls = append(r.calls, "busy"); r.mu.Unlock() }
func (r *idleRecorder) Idle() { r.mu.Lock(); r.calls = append(r.calls, "idle"); r.mu.Unlock() }

func (r *idleRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.calls, " ")
}

// TestRefusedBodiesTrim: a one-shot body refused as it is read, which
// never reaches the orchestrator (here an unsigned payload on a server
// with a key), still tells the server's memory trimmer (RunMemoryIdle)
// that memory was taken and given back, so that what it left is trimmed
// once the server is quiet, as after a request.
func TestRefusedBodiesTrim(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	unsigned, err := payload.NewCodec(nil).Encode(&payload.Envelope{Pipeline: cfg.Pipeline.Name, Digest: cfg.Digest(), TransferID: "t", RequestID: "r",
		From: 0, To: 1, Final: 1, Params: make([]json.RawMessage, cfg.Route.NumIDs()), Outputs: []string{"text"},
		Data: []engine.Chunk{{Text: &engine.Text{Text: strings.Repeat("x", 1<<20)}}}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"stage_id": 1, "stage_input": unsigned})
	obs := &idleRecorder{}
	one := 1
	srv := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{
		Stage: &one, Codec: payload.NewCodec([]byte("refused-bodies-key-0123456789")), RunMemoryIdle: obs,
	})
	for range 2 {
		resp, err := http.Post(srv.URL+"/v1/run", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), payload.CodeSignatureMissing) {
			t.Fatalf("an unsigned payload: %d %s", resp.StatusCode, msg)
		}
	}
	testkit.Eventually(t, "the trimmer told of both bodies", func() bool { return obs.String() == "busy idle busy idle" })
}
