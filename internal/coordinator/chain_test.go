package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/coordinator"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestChainMatchesOneServer drives three headless stage servers with the
// streamed chain and checks the outputs against one server's in-process
// run: same chunks, in order, and every hop reported once.
func TestChainMatchesOneServer(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	const key = "chain-test-key-0123456789"
	params := []json.RawMessage{json.RawMessage(`{"tag":"x"}`), json.RawMessage(`{"tag":"y"}`), json.RawMessage(`{"tag":"z"}`)}
	full := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{})
	st, err := full.Orch.Submit(context.Background(), orchestrator.Request{Prompt: engine.Prompt{Text: "hello world"}, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := hoptest.Collected{}
	for _, c := range res[0].Chunks {
		_ = want.Add(engine.KindText, c)
	}

	urls := hoptest.StartStages(t, cfg, key, nil)
	var mu sync.Mutex
	var hops []coordinator.CallReport
	chain := &coordinator.Chain{Stages: urls, OnCall: func(h coordinator.CallReport) { mu.Lock(); hops = append(hops, h); mu.Unlock() }}
	req := hoptest.Prompt("hello world")
	req.SamplingParams = params
	got, result, err := hoptest.Run(context.Background(), chain, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() || got.String() != "text=hello world|a+x.0|b+y.0|c+z.0 / hello world|a+x.1|b+y.0|c+z.0" {
		t.Errorf("chain: %s\nwant: %s", got, want)
	}
	if result.Stage != 2 || !strings.HasPrefix(result.RequestID, "req-") {
		t.Errorf("result %+v", result)
	}
	if len(hops) != 3 {
		t.Fatalf("%d hops reported, want 3: %+v", len(hops), hops)
	}
	for _, h := range hops {
		if h.Err != nil || h.Chunks != 2 || h.FirstChunk <= 0 || h.FirstChunk > h.Duration || h.Bytes == 0 {
			t.Errorf("hop %+v", h)
		}
		if h.Finished != (h.Stage == 2) || (!h.Finished && h.Next != h.Stage+1) {
			t.Errorf("hop %d: finished %v, next %d", h.Stage, h.Finished, h.Next)
		}
	}
}

// TestChainStreams checks that every stage runs at once: the last stage's
// first output reaches the caller while stage 0 is still producing.
func TestChainStreams(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	release := make(chan struct{})
	hooks := &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if e.Spec.StageID == 0 && n == 1 {
			// Stage 0 holds its second chunk until the first has come
			// out of stage 2, at the caller.
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	urls := hoptest.StartStages(t, cfg, "", hooks)
	var once sync.Once
	var n int
	_, err := (&coordinator.Chain{Stages: urls}).Run(context.Background(), hoptest.Prompt("streamed"), func(kind engine.Kind, c engine.Chunk) error {
		n++
		once.Do(func() { close(release) })
		return nil
	})
	if err != nil || n != 2 {
		t.Fatalf("%d outputs, %v", n, err)
	}
}

// TestChainErrors checks how a chain fails: a 4xx ends it at once without
// a retry; a stage that fails mid-stream is named; nothing stays bound on
// any server.
func TestChainErrors(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	fail := &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if e.Spec.StageID == 1 && n == 1 {
			return &engine.InputError{Reason: "stage 1 refuses its second chunk"}
		}
		return nil
	}}
	urls := hoptest.StartStages(t, cfg, "", fail)

	t.Run("bad params", func(t *testing.T) {
		req := hoptest.Prompt("x")
		req.SamplingParams = []json.RawMessage{json.RawMessage(`{"nope": 1}`)}
		calls := 0
		_, _, err := hoptest.Run(context.Background(), &coordinator.Chain{Stages: urls, OnCall: func(coordinator.CallReport) { calls++ }}, req)
		var he *hop.HTTPError
		var se *coordinator.CallError
		if !errors.As(err, &he) || he.Status != 400 || !errors.As(err, &se) || se.Stage != 0 || hop.Retryable(err) || calls != 1 {
			t.Fatalf("err = %v after %d calls", err, calls)
		}
	})
	t.Run("mid-stream", func(t *testing.T) {
		_, _, err := hoptest.Run(context.Background(), &coordinator.Chain{Stages: urls}, hoptest.Prompt("x"))
		var he *hop.HTTPError
		var se *coordinator.CallError
		if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Message, "refuses its second chunk") || !errors.As(err, &se) || se.Stage != 1 {
			t.Fatalf("err = %#v", err)
		}
	})
	t.Run("no server", func(t *testing.T) {
		_, _, err := hoptest.Run(context.Background(), &coordinator.Chain{Stages: map[int][]string{0: urls[0]}}, hoptest.Prompt("x"))
		var ns *coordinator.NoServerError
		if !errors.As(err, &ns) || ns.Stage != 1 {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestChainRetries checks that a call that gets no answer, or a 5xx
// before its answer starts, moves on to the stage's next server with the
// input it had read replayed, and that round robin spreads the hops.
func TestChainRetries(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	urls := hoptest.StartStages(t, cfg, "", nil)
	var busy atomic.Int32
	overloaded := apitest.Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busy.Add(1)
		// Read some of the streamed input first, as a server that fails
		// at admission has: the retry must send it again.
		_, _ = io.ReadFull(r.Body, make([]byte, 30))
		hoptest.WriteErr(w, http.StatusServiceUnavailable, "overloaded", "busy")
	}))
	stages := map[int][]string{0: urls[0], 1: {"http://" + testkit.FreeAddr(t), overloaded, urls[1][0]}, 2: urls[2]}
	var mu sync.Mutex
	var hops []coordinator.CallReport
	chain := &coordinator.Chain{Stages: stages, Backoff: time.Millisecond, OnCall: func(h coordinator.CallReport) { mu.Lock(); hops = append(hops, h); mu.Unlock() }}
	got, _, err := hoptest.Run(context.Background(), chain, hoptest.Prompt("retry"))
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "text=retry|a.0|b.0|c.0 / retry|a.1|b.0|c.0" {
		t.Errorf("output %s", got)
	}
	var stage1 []string
	for _, h := range hops {
		if h.Stage == 1 {
			stage1 = append(stage1, map[bool]string{true: "retry", false: "ok"}[h.Retrying])
		}
	}
	if strings.Join(stage1, " ") != "retry retry ok" || busy.Load() != 1 {
		t.Errorf("stage 1 calls: %v, the busy server called %d times", stage1, busy.Load())
	}
	// The next request starts at stage 1's second server, then goes on.
	if _, _, err := hoptest.Run(context.Background(), chain, hoptest.Prompt("again")); err != nil || busy.Load() != 2 {
		t.Errorf("second request: %v, busy server called %d times", err, busy.Load())
	}
}

// TestChainCancel cancels a chain while its stages run: Run returns the
// cancellation at once and every server ends idle.
func TestChainCancel(t *testing.T) {
	cfg := testkit.Parse(t, hoptest.TextPipeline)
	started := make(chan struct{})
	var once sync.Once
	hooks := &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if e.Spec.StageID == 2 {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	var orchs []*orchestrator.Orchestrator
	urls := map[int][]string{}
	for id := range 3 {
		stage := id
		s := apitest.Start(t, cfg, orchestrator.Options{Registry: hoptest.Registry(hooks)}, api.Options{Stage: &stage})
		urls[id], orchs = []string{s.URL}, append(orchs, s.Orch)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := hoptest.Run(ctx, &coordinator.Chain{Stages: urls}, hoptest.Prompt("cancel me"))
		errc <- err
	}()
	<-started
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || hop.Retryable(err) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	hoptest.Idle(t, orchs...)
}

// TestChainMatchesGenerate drives three headless stage servers (talker,
// vocoder, aligner) over the real engines, signed, and checks the audio
// and timestamps against a single server's /v1/generate; the audio comes
// from the vocoder's hand-off as it passes, the timestamps as the aligner
// makes them (its first words while later audio is still flowing).
func TestChainMatchesGenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers with the real engines")
	}
	cfg, err := pipeline.Builtin("tts")
	if err != nil {
		t.Fatal(err)
	}
	reg := &engine.Registry{}
	flite.Register(reg)
	sphinx.Register(reg)
	const key = "e2e-payload-key-0123456789"
	full := apitest.Start(t, cfg, orchestrator.Options{Registry: reg}, api.Options{})
	stages := map[int][]string{}
	for id := range 3 {
		stage := id
		stages[id] = []string{apitest.Start(t, cfg, orchestrator.Options{Registry: reg}, api.Options{Stage: &stage, Codec: payload.NewCodec([]byte(key))}).URL}
	}
	const text = "Stage servers keep no state between calls. Each hop streams."
	params := []json.RawMessage{json.RawMessage(`{"voice":"slt","speed":1.2}`), nil, nil}
	modalities := []string{"audio", "timestamps"}

	body, _ := json.Marshal(apijson.GenerateRequest{Input: &apijson.Input{Text: text}, OutputModalities: modalities, SamplingParams: params})
	resp, err := http.Post(full.URL+"/v1/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/v1/generate: %d %s", resp.StatusCode, data)
	}
	var gen apijson.GenerateResponse
	if err := json.Unmarshal(data, &gen); err != nil {
		t.Fatal(err)
	}
	var wantAudio *engine.Audio
	var wantWords []engine.Word
	for _, o := range gen.Outputs {
		if o.Audio != nil {
			if wantAudio, err = audio.ReadWAV(bytes.NewReader(o.Audio.Data)); err != nil {
				t.Fatal(err)
			}
		}
		if o.Timestamps != nil {
			wantWords = o.Timestamps
		}
	}
	if wantAudio == nil || len(wantWords) == 0 {
		t.Fatalf("/v1/generate answered %s", data)
	}

	var audioChunks []engine.Chunk
	var words []engine.Word
	req := hoptest.Prompt(text, modalities...)
	req.SamplingParams = params
	_, err = (&coordinator.Chain{Stages: stages}).Run(context.Background(), req, func(kind engine.Kind, c engine.Chunk) error {
		switch kind {
		case engine.KindAudio:
			audioChunks = append(audioChunks, c)
		case engine.KindTimestamps:
			words = append(words, c.Words.Words...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := engine.JoinAudio(audioChunks)
	if err != nil || got == nil {
		t.Fatalf("audio: %v", err)
	}
	if got.SampleRate != wantAudio.SampleRate || !reflect.DeepEqual(got.Samples, wantAudio.Samples) {
		t.Errorf("audio differs from /v1/generate's: %d samples at %d Hz, want %d at %d Hz", len(got.Samples), got.SampleRate, len(wantAudio.Samples), wantAudio.SampleRate)
	}
	if !reflect.DeepEqual(words, wantWords) {
		t.Errorf("timestamps %v, want %v", words, wantWords)
	}
	if len(audioChunks) < 5 {
		t.Errorf("the audio came in %d chunks; the vocoder streams blocks of at most 100 ms", len(audioChunks))
	}

	// A hand-off for the vocoder posted to the aligner's server is refused
	// with a 4xx that names the problem, and nothing is retried; the
	// server reads on what comes of the long hand-off after its answer
	// (see TestRefusedStreamAnswered).
	wrong := &coordinator.Chain{Stages: map[int][]string{0: stages[0], 1: stages[2]}}
	_, _, err = hoptest.Run(context.Background(), wrong, hoptest.Prompt(text))
	var he *hop.HTTPError
	if !errors.As(err, &he) || he.Status != 400 || he.Code != "wrong_stage" || hop.Retryable(err) {
		t.Fatalf("hand-off to the wrong server: %v", err)
	}
}
