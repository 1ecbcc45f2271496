package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// speechYAML is the fake speech pipeline: talker -> vocoder, aligner 2.
const speechYAML = `
pipeline:
  name: speech
  input: text
  stages:
    - {id: 0, name: talker,  engine: test-speaker, input: text,   output: frames}
    - {id: 1, name: vocoder, engine: test-synth,   input: frames, output: audio, final_output: true}
  aligner: {engine: test-align}
deploy:
  abort_timeout: 2s
`

// threeYAML adds a post stage after the vocoder: 0 -> 1 -> 2, aligner 3.
// With transitions %s.
const threeYAML = `
pipeline:
  name: three
  input: text
  stages:
    - {id: 0, name: talker,  engine: test-speaker, input: text,   output: frames}
    - {id: 1, name: vocoder, engine: test-synth,   input: frames, output: audio, final_output: true}
    - {id: 2, name: post,    engine: test-gain,    input: audio,  output: audio, final_output: true}
  %s
  aligner: {engine: test-align}
`

// reorderYAML lists the vocoder last but routes 0 -> 2 -> 1: the post
// stage (1) runs after the vocoder (2).
const reorderYAML = `
pipeline:
  name: reorder
  input: text
  stages:
    - {id: 0, name: talker,  engine: test-speaker, input: text,   output: frames}
    - {id: 1, name: post,    engine: test-gain,    input: audio,  output: audio, final_output: true}
    - {id: 2, name: vocoder, engine: test-synth,   input: frames, output: audio, final_output: true}
  stage_transitions: [[0, 2], [2, 1]]
  aligner: {engine: test-align}
`

// textYAML is a testengine pipeline of text stages, for lifecycle tests
// that steer the engines with testengine.Hooks.
const textYAML = `
pipeline:
  name: text
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
deploy:
  abort_timeout: %s
  stages:
    - {id: 0, max_inflight: 64}
    - {id: 1, max_inflight: 64, options: {split: true}}
`

type fixture struct {
	t      *testing.T
	orch   *orchestrator.Orchestrator
	srv    *Server
	ts     *httptest.Server
	url    string
	reg    *prometheus.Registry
	client *http.Client
}

type setup struct {
	yaml  string
	opts  Options
	fakes *fakeHooks
	hooks *testengine.Hooks
	// engines registers more engines.
	engines func(*engine.Registry)
	// noStart leaves the orchestrator cold (Run starts it).
	noStart bool
	// placements build the stages that run outside this process.
	placements map[pipeline.Placement]orchestrator.Placement
}

// newOrchestrator builds the orchestrator of a test pipeline.
func newOrchestrator(t testing.TB, s setup, reg *prometheus.Registry) *orchestrator.Orchestrator {
	t.Helper()
	cfg, err := pipeline.Parse([]byte(s.yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	engines := &engine.Registry{}
	testengine.Register(engines, s.hooks, "test-a", "test-b", "test-c")
	registerFakes(engines, s.fakes)
	if s.engines != nil {
		s.engines(engines)
	}
	o, err := orchestrator.New(cfg, orchestrator.Options{Registry: engines, Registerer: reg, Placements: s.placements})
	if err != nil {
		t.Fatalf("orchestrator: %v", err)
	}
	return o
}

func newFixture(t testing.TB, s setup) *fixture {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := newOrchestrator(t, s, reg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if !s.noStart {
		if err := o.Start(context.Background()); err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	s.opts.Registry = reg
	if s.opts.Logger == nil {
		s.opts.Logger = testLogger(t)
	}
	srv, err := New([]*orchestrator.Orchestrator{o}, s.opts)
	if err != nil {
		t.Fatalf("api: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ts.Close()
	})
	f := &fixture{orch: o, srv: srv, ts: ts, url: ts.URL, reg: reg, client: &http.Client{Transport: tr}}
	if tt, ok := t.(*testing.T); ok {
		f.t = tt
	}
	return f
}

// testLogger logs to the test at warn level and above.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// do sends a request and returns the response with its whole body.
func (f *fixture) do(ctx context.Context, method, path string, body any, hdr ...string) (*http.Response, []byte) {
	f.t.Helper()
	resp, err := f.send(ctx, method, path, body, hdr...)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp, b
}

// send sends a request; body is a string (sent as is) or a value sent as
// JSON; hdr holds header name, value pairs.
func (f *fixture) send(ctx context.Context, method, path string, body any, hdr ...string) (*http.Response, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, r)
	if err != nil {
		return nil, err
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json") // as clients send it
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return f.client.Do(req)
}

// post posts body as JSON and decodes a 200 answer into out.
func (f *fixture) post(path string, body, out any, hdr ...string) {
	f.t.Helper()
	resp, b := f.do(context.Background(), http.MethodPost, path, body, hdr...)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		f.t.Fatalf("POST %s: decoding %s: %v", path, b, err)
	}
}

// wantError checks an OpenAI-shaped error answer.
func wantError(t testing.TB, resp *http.Response, body []byte, status int, code, msg string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e apijson.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("body %s is not an OpenAI error: %v", body, err)
	}
	if code != "" && e.Error.Code != code {
		t.Errorf("code %q, want %q (message %q)", e.Error.Code, code, e.Error.Message)
	}
	if !strings.Contains(e.Error.Message, msg) {
		t.Errorf("message %q does not contain %q", e.Error.Message, msg)
	}
}

// refusal is a request an endpoint refuses: its body (a string is sent as
// it is, anything else as JSON), more headers (name, value pairs), and the
// answer's status, code and a part of its message.
type refusal struct {
	name   string
	body   any
	hdr    []string
	status int
	code   string
	msg    string
}

// gate blocks the engines' chunks until opened.
type gate struct {
	ch chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { close(g.ch) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expectedSpeech is what the fake pipeline says for text with the default
// voice and speed: its samples, and its duration in ms.
func expectedSpeech(text, voice string, speed float64) []int16 {
	var s []int16
	for _, w := range strings.Fields(text) {
		params := make([]float32, len(w))
		for i := range len(w) {
			params[i] = float32(w[i])
		}
		s = append(s, synth(&engine.Frames{Voice: voice, Channels: 1, Params: params, FrameShift: float32(0.01 / speed)}).Samples...)
	}
	return s
}
