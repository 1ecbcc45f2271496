package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

// twoPipelines serves the pipelines of yamls (one per entry) in one
// server, as serve does: one registry of request ids, one metrics
// registry with a pipeline label per orchestrator.
func twoPipelines(t *testing.T, hooks *testengine.Hooks, opts Options, yamls ...string) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	reqs := orchestrator.NewRequests()
	var orchs []*orchestrator.Orchestrator
	for _, y := range yamls {
		cfg, err := pipeline.Parse([]byte(y), "test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		engines := &engine.Registry{}
		testengine.Register(engines, hooks, "test-a", "test-b", "test-c")
		registerFakes(engines, nil)
		o, err := orchestrator.New(cfg, orchestrator.Options{Registry: engines, Requests: reqs,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": cfg.Pipeline.Name}, reg)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = o.Shutdown(context.Background()) })
		if err := o.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		orchs = append(orchs, o)
	}
	opts.Registry = reg
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	srv, err := New(orchs, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &fixture{t: t, orch: orchs[0], srv: srv, ts: ts, url: ts.URL, reg: reg, client: &http.Client{}}
}

// otherYAML is speechYAML named other.
var otherYAML = strings.Replace(speechYAML, "name: speech", "name: other", 1)

// slowYAML is a text pipeline named slow that admits two requests at once.
var slowYAML = strings.Replace(strings.Replace(fmt.Sprintf(textYAML, "2s"), "name: text", "name: slow", 1), "abort_timeout: 2s", "abort_timeout: 2s\n  max_inflight: 2", 1)

// get decodes the JSON answer of GET path into out.
func (f *fixture) get(path string, out any) {
	f.t.Helper()
	resp, body := f.do(context.Background(), http.MethodGet, path, nil)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		f.t.Fatalf("GET %s: %v", path, err)
	}
}

// TestManyPipelines checks a server of two pipelines: each request's
// model picks its pipeline, the OpenAI names stand for the default one,
// an unknown model is a 404 listing the models, the discovery endpoints
// list both, and each pipeline's metrics carry its name.
func TestManyPipelines(t *testing.T) {
	f := twoPipelines(t, nil, Options{DefaultModel: "other"}, speechYAML, otherYAML)
	for _, model := range []string{"speech", "other", "tts-1"} {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": model, "input": "Hello.", "response_format": "pcm"})
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("model %s: %d %s", model, resp.StatusCode, body)
		}
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "nope", "input": "Hello."})
	wantError(t, resp, body, 404, "model_not_found", "models: speech, other, tts-1, tts-1-hd, gpt-4o-mini-tts")

	var models apijson.ModelList
	f.get("/v1/models", &models)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID+":"+m.AliasOf)
	}
	if got := strings.Join(ids, " "); got != "speech: other: tts-1:other tts-1-hd:other gpt-4o-mini-tts:other" {
		t.Errorf("models %s", got)
	}
	if m := models.Data[0]; m.Input != "text" || !m.WordTimestamps || fmt.Sprint(m.Outputs) != "[audio timestamps]" || m.Ready == nil || !*m.Ready {
		t.Errorf("speech: %+v", m)
	}
	var audioModels apijson.AudioModels
	f.get("/v1/audio/models", &audioModels)
	if len(audioModels.Models) != 5 || audioModels.Models[1].ID != "other" {
		t.Errorf("audio models %+v", audioModels)
	}
	var info apijson.PipelineInfo
	f.get("/v1/pipeline?model=other", &info)
	if info.Name != "other" {
		t.Errorf("GET /v1/pipeline?model=other: %s", info.Name)
	}
	resp, body = f.do(context.Background(), http.MethodGet, "/v1/audio/voices?model=nope", nil)
	wantError(t, resp, body, 404, "model_not_found", "nope")
	resp, body = f.do(context.Background(), http.MethodGet, "/metrics", nil)
	for _, want := range []string{`omnistage_requests_total{outcome="ok",pipeline="speech"} 1`, `omnistage_requests_total{outcome="ok",pipeline="other"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	_ = resp
}

// TestPipelineShadowsAlias: a pipeline named like an OpenAI model name
// that stands for another (the default) gets requests for that name, and
// the server says so at start-up; named so as the default, it does not.
func TestPipelineShadowsAlias(t *testing.T) {
	shadow := strings.Replace(speechYAML, "name: speech", "name: tts-1", 1)
	for _, tc := range []struct {
		def  string
		warn bool
	}{{"other", true}, {"tts-1", false}} {
		t.Run(tc.def, func(t *testing.T) {
			var log bytes.Buffer
			twoPipelines(t, nil, Options{DefaultModel: tc.def, Logger: slog.New(slog.NewTextHandler(&log, nil))}, shadow, otherYAML)
			warned := strings.Contains(log.String(), "level=WARN") && strings.Contains(log.String(), "pipeline=tts-1")
			if warned != tc.warn {
				t.Errorf("default %s: warned %v, want %v:\n%s", tc.def, warned, tc.warn, log.String())
			}
		})
	}
}

// TestPipelinesIsolated drives one pipeline past its admission limit: its
// excess requests are refused at once (503), while every request of the
// other pipeline is admitted and served.
func TestPipelinesIsolated(t *testing.T) {
	release := make(chan struct{})
	hooks := &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if strings.HasPrefix(job.RequestID, "held") {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	f := twoPipelines(t, hooks, Options{}, speechYAML, slowYAML)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Two slow requests hold the slow pipeline's whole limit.
	var held sync.WaitGroup
	for i := range 2 {
		held.Go(func() {
			resp, body := f.do(ctx, http.MethodPost, "/v1/generate", map[string]any{"model": "slow", "input": fmt.Sprintf("held %d.", i), "request_id": fmt.Sprintf("held-%d", i)})
			if resp.StatusCode != http.StatusOK {
				t.Errorf("held request: %d %s", resp.StatusCode, body)
			}
		})
	}
	testkit.Eventually(t, "two slow requests in flight", func() bool { return f.srv.byName["slow"].orch.Stats().InFlight == 2 })
	for range 5 {
		resp, body := f.do(ctx, http.MethodPost, "/v1/generate", map[string]any{"model": "slow", "input": "Too many."})
		wantError(t, resp, body, 503, "overloaded", "limit is 2")
	}
	for i := range 10 {
		resp, body := f.do(ctx, http.MethodPost, "/v1/generate", map[string]any{"model": "speech", "input": fmt.Sprintf("Served %d.", i)})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the other pipeline's request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	// An id held in one pipeline is held in the other.
	resp, body := f.do(ctx, http.MethodPost, "/v1/generate", map[string]any{"model": "speech", "input": "Same id.", "request_id": "held-0"})
	wantError(t, resp, body, 409, "conflict", "held-0")
	close(release)
	held.Wait()
	var gen json.RawMessage
	f.post("/v1/generate", map[string]any{"model": "slow", "input": "Free again."}, &gen)
}

// TestStartPartial: with StartPartial, a pipeline whose engine cannot
// warm (a model file missing) is named by /ready, which is ready once
// the others are; its requests are 503s saying why, and the others serve.
func TestStartPartial(t *testing.T) {
	reqs := orchestrator.NewRequests()
	var orchs []*orchestrator.Orchestrator
	for _, y := range []string{
		strings.Replace(fmt.Sprintf(textYAML, "2s"), "name: text", "name: good", 1),
		strings.Replace(fmt.Sprintf(textYAML, "2s"), "name: text", "name: broken", 1),
	} {
		cfg := testkit.Parse(t, y)
		engines := &engine.Registry{}
		hooks := &testengine.Hooks{Warm: func(e *testengine.Engine) error {
			if cfg.Pipeline.Name == "broken" && e.Spec.StageID == 1 {
				return errors.New("model file /models/b.onnx is missing")
			}
			return nil
		}}
		testengine.Register(engines, hooks, "test-a", "test-b", "test-c")
		o, err := orchestrator.New(cfg, orchestrator.Options{Registry: engines, Requests: reqs})
		if err != nil {
			t.Fatal(err)
		}
		orchs = append(orchs, o)
	}
	srv, err := New(orchs, Options{StartPartial: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	url, stop := runServer(t, srv)
	c := &http.Client{}
	var body string
	testkit.Eventually(t, "/ready", func() bool {
		var code int
		code, body = get(t, c, url+"/ready")
		return code == http.StatusOK
	})
	if !strings.Contains(body, `"unavailable":{"broken":`) || !strings.Contains(body, "model file /models/b.onnx is missing") {
		t.Errorf("/ready = %s; want it to name the broken pipeline and why", body)
	}
	if code, body := get(t, c, url+"/ready?model=broken"); code != http.StatusServiceUnavailable || !strings.Contains(body, "is missing") {
		t.Errorf("/ready?model=broken = %d %s", code, body)
	}
	for model, want := range map[string]int{"good": http.StatusOK, "broken": http.StatusServiceUnavailable} {
		resp, err := c.Post(url+"/v1/generate", "application/json", strings.NewReader(`{"model": "`+model+`", "input": "hi", "output_modalities": ["text"]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("model %s: %d %s; want %d", model, resp.StatusCode, b, want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}
