package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/remote"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

func TestRemoteStagesMatchLocal(t *testing.T) {
	params := []json.RawMessage{json.RawMessage(`{"tag":"x"}`), json.RawMessage(`{"tag":"y"}`), json.RawMessage(`{"tag":"z"}`)}
	req := orchestrator.Request{Prompt: engine.Prompt{Text: "hello world"}, Params: params}
	local := startLocal(t, fmt.Sprintf(textPipeline, inprocDeploy), nil)
	want, err := generate(local, req)
	if err != nil {
		t.Fatal(err)
	}
	if want != "hello world|a+x.0|b+y.0|c+z.0hello world|a+x.1|b+y.0|c+z.0" {
		t.Fatalf("local output %q", want)
	}
	for _, tc := range []struct {
		name   string
		remote []int
	}{
		{"entry stage", []int{0}},
		{"middle stage", []int{1}},
		{"last stage", []int{2}},
		{"every stage", []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := fmt.Sprintf(textPipeline, inprocDeploy)
			urls := map[int]string{}
			for _, id := range tc.remote {
				urls[id] = startStageServer(t, servers, id, "")
			}
			o := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(urls, "")), nil)
			for range 3 { // calls reuse connections and leave nothing behind
				got, err := generate(o, req)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("output %q, want %q", got, want)
				}
			}
			if s := o.Stats(); s.InFlight != 0 || s.Bindings() != 0 {
				t.Fatalf("stats after the requests: %+v", s)
			}
		})
	}
}

func TestRemoteSignedPayloads(t *testing.T) {
	const key = "a-key-of-enough-length-1234"
	servers := fmt.Sprintf(textPipeline, inprocDeploy)
	url := startStageServer(t, servers, 1, key)
	req := orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}}

	o := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: url}, "")), payload.NewCodec([]byte(key)))
	if got, err := generate(o, req); err != nil || got != "hi|a.0|b.0|c.0hi|a.1|b.0|c.0" {
		t.Fatalf("signed: %q, %v", got, err)
	}

	wrong := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: url}, "")), payload.NewCodec([]byte("another-key-of-enough-length")))
	_, err := generate(wrong, req)
	if err == nil || !strings.Contains(err.Error(), "signature") || orchestrator.CodeOf(err) != orchestrator.CodeStageFailed {
		t.Fatalf("wrong key: %v (code %s)", err, orchestrator.CodeOf(err))
	}
	unsigned := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: url}, "")), nil)
	if _, err := generate(unsigned, req); err == nil || !strings.Contains(err.Error(), payload.CodeSignatureMissing) {
		t.Fatalf("unsigned: %v", err)
	}
	// A refused payload is not a lost replica: the next request still
	// finds it.
	if s := wrong.Stats(); s.Stages[1].Healthy != 1 {
		t.Fatalf("stage 1 after refused payloads: %+v", s.Stages[1])
	}
}

func TestRemoteRefusals(t *testing.T) {
	servers := fmt.Sprintf(textPipeline, inprocDeploy)
	url := startStageServer(t, servers, 1, "")
	o := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: url}, "")), nil)

	// The remote engine refusing the request's params is the caller's
	// fault here too.
	_, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}, Params: []json.RawMessage{nil, json.RawMessage(`{"fail":true}`), nil}})
	if orchestrator.CodeOf(err) != orchestrator.CodeBadRequest || !strings.Contains(err.Error(), "stage 1 was asked to fail") {
		t.Fatalf("fail param: %v (code %s)", err, orchestrator.CodeOf(err))
	}

	// A server running another configuration of the pipeline refuses the
	// payload, naming why.
	other := strings.Replace(servers, "name: c,", "name: renamed,", 1)
	o2 := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: startStageServer(t, other, 1, "")}, "")), nil)
	_, err = generate(o2, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}})
	if err == nil || !strings.Contains(err.Error(), "another configuration") || !strings.Contains(err.Error(), url[:len("http://127.0.0.1:")]) {
		t.Fatalf("other config: %v", err)
	}

	// A server of another stage says so.
	o3 := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: startStageServer(t, servers, 2, "")}, "")), nil)
	_, err = generate(o3, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}})
	if err == nil || !strings.Contains(err.Error(), "this server runs stage 2") {
		t.Fatalf("wrong stage: %v", err)
	}
}

func TestRemoteServerGoneFailsOverToLost(t *testing.T) {
	servers := fmt.Sprintf(textPipeline, inprocDeploy)
	url, stop := startStageServerStop(t, servers, 1, "")
	o := startLocal(t, fmt.Sprintf(textPipeline, remoteDeploy(map[int]string{1: url}, "health_interval: 5ms, health_failures: 2")), nil)
	if _, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
	stop()
	eventually(t, "the replica to be lost", func() bool { return o.Stats().Stages[1].Healthy == 0 })
	_, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}})
	if orchestrator.CodeOf(err) != orchestrator.CodeUnavailable || !strings.Contains(err.Error(), "no healthy replica") {
		t.Fatalf("after loss: %v", err)
	}
}

// fakeServer is a stage server whose /ready, /health and /v1/run a test
// steers.
type fakeServer struct {
	ready  func(n int) int // status of the n-th /ready probe, from 1
	health func(n int) int
	run    http.HandlerFunc

	readyN, healthN, runN atomic.Int32
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := func(fn func(int) int, n int32) {
		code := http.StatusOK
		if fn != nil {
			code = fn(int(n))
		}
		w.WriteHeader(code)
	}
	switch r.URL.Path {
	case "/ready":
		status(f.ready, f.readyN.Add(1))
	case "/health":
		status(f.health, f.healthN.Add(1))
	case "/v1/run":
		f.runN.Add(1)
		f.run(w, r)
	default:
		http.NotFound(w, r)
	}
}

func startFake(t *testing.T, f *fakeServer) string {
	t.Helper()
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return s.URL
}

// newEngine builds a replica of stage of textPipeline at url.
func newEngine(t *testing.T, stage int, url string, opts engine.Options) *remote.Engine {
	t.Helper()
	cfg := parse(t, fmt.Sprintf(textPipeline, inprocDeploy))
	o := engine.Options{remote.OptEndpoint: url, remote.OptPipeline: cfg}
	for k, v := range opts {
		o[k] = v
	}
	_, spec := cfg.StageSpec(stage, 0)
	spec.Options = o
	e, err := remote.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func process(e *remote.Engine, in ...string) ([]engine.Chunk, error) {
	chunks := make([]engine.Chunk, len(in))
	for i, s := range in {
		chunks[i] = engine.Chunk{Text: &engine.Text{Text: s}}
	}
	out := &engine.SliceSink{}
	err := e.Process(context.Background(), &engine.Job{RequestID: "r1", StageID: 1, In: engine.NewSliceSource(chunks...), Out: out})
	return out.Chunks, err
}

func isLost(e *remote.Engine) bool {
	select {
	case <-e.Lost():
		return true
	default:
		return false
	}
}

func TestRemoteLostMidRequest(t *testing.T) {
	f := &fakeServer{run: func(w http.ResponseWriter, r *http.Request) {
		// The server dies while running the stage: the connection drops
		// without an answer.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}}
	e := newEngine(t, 1, startFake(t, f), nil)
	if err := e.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := process(e, "hi")
	if !errors.Is(err, engine.ErrReplicaLost) || !strings.Contains(err.Error(), e.Endpoint()) {
		t.Fatalf("err = %v", err)
	}
	if !isLost(e) {
		t.Fatal("Lost not closed after a dropped connection")
	}
	// A lost replica sends nothing more.
	if _, err := process(e, "hi"); !errors.Is(err, engine.ErrReplicaLost) || f.runN.Load() != 1 {
		t.Fatalf("after loss: %v, %d calls", err, f.runN.Load())
	}
}

func TestRemoteErrorAnswersDoNotLose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		check  func(error) bool
	}{
		{"503", 503, `{"error":{"message":"server busy","type":"server_error","code":"overloaded"}}`, func(err error) bool {
			return strings.Contains(err.Error(), "503 overloaded: server busy")
		}},
		{"400 input", 400, `{"error":{"message":"unknown voice","type":"invalid_request_error","code":"bad_request"}}`, func(err error) bool {
			var ie *engine.InputError
			return errors.As(err, &ie) && ie.Reason == "unknown voice"
		}},
		{"400 payload", 400, `{"error":{"message":"bad payload","type":"invalid_request_error","code":"payload_undecodable"}}`, func(err error) bool {
			var ie *engine.InputError
			return !errors.As(err, &ie) && strings.Contains(err.Error(), "bad payload")
		}},
		{"200 not finished, garbage payload", 200, `{"request_id":"r1","stage_id":2,"finished":false,"stage_input":"garbage"}`, func(err error) bool {
			return strings.Contains(err.Error(), "stage_input")
		}},
		{"200 finished too early", 200, `{"request_id":"r1","stage_id":1,"finished":true,"output":{"text":"x"}}`, func(err error) bool {
			return strings.Contains(err.Error(), "same pipeline")
		}},
		{"200 wrong next stage", 200, `{"request_id":"r1","stage_id":0,"finished":false,"stage_input":"x"}`, func(err error) bool {
			return strings.Contains(err.Error(), "successor is stage 2")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{run: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}}
			e := newEngine(t, 1, startFake(t, f), nil)
			_, err := process(e, "hi")
			if err == nil || !tc.check(err) || errors.Is(err, engine.ErrReplicaLost) {
				t.Fatalf("err = %v", err)
			}
			if isLost(e) {
				t.Fatal("an error answer lost the replica")
			}
		})
	}
}

func TestRemoteCallTimeout(t *testing.T) {
	f := &fakeServer{run: func(w http.ResponseWriter, r *http.Request) {
		// The server notices a client that went away only once the body
		// has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}}
	e := newEngine(t, 1, startFake(t, f), engine.Options{remote.OptTimeout: "50ms"})
	_, err := process(e, "hi")
	if err == nil || !strings.Contains(err.Error(), "no answer within 50ms") || errors.Is(err, context.DeadlineExceeded) || isLost(e) {
		t.Fatalf("err = %v, lost %v", err, isLost(e))
	}

	// The request's own cancellation comes back as it is.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for f.runN.Load() < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err = e.Process(ctx, &engine.Job{StageID: 1, In: engine.NewSliceSource(engine.Chunk{Text: &engine.Text{Text: "x"}}), Out: &engine.SliceSink{}})
	if !errors.Is(err, context.Canceled) || isLost(e) {
		t.Fatalf("cancel: %v", err)
	}
}

func TestRemoteHealthChecks(t *testing.T) {
	opts := engine.Options{remote.OptHealthInterval: "2ms", remote.OptHealthFailures: 3}

	t.Run("failures in a row lose the replica", func(t *testing.T) {
		var down atomic.Bool
		f := &fakeServer{health: func(n int) int {
			if down.Load() {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}}
		e := newEngine(t, 1, startFake(t, f), opts)
		if err := e.Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		eventually(t, "health checks", func() bool { return f.healthN.Load() >= 3 })
		if isLost(e) {
			t.Fatal("lost while healthy")
		}
		down.Store(true)
		eventually(t, "the replica to be lost", func() bool { return isLost(e) })
	})

	t.Run("fewer failures in a row do not", func(t *testing.T) {
		f := &fakeServer{health: func(n int) int {
			if n%3 != 0 { // two failures, then one success
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}}
		e := newEngine(t, 1, startFake(t, f), opts)
		if err := e.Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		eventually(t, "health checks", func() bool { return f.healthN.Load() >= 20 || isLost(e) })
		if isLost(e) {
			t.Fatal("lost after fewer failures in a row than health_failures")
		}
	})

	t.Run("no checks before Warm or after Close", func(t *testing.T) {
		f := &fakeServer{}
		e := newEngine(t, 1, startFake(t, f), opts)
		time.Sleep(20 * time.Millisecond)
		if n := f.healthN.Load(); n != 0 {
			t.Fatalf("%d health checks before Warm", n)
		}
		if err := e.Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		eventually(t, "health checks", func() bool { return f.healthN.Load() >= 1 })
		e.Close()
		// A check already on the wire when Close cancelled it may still
		// reach the server; no new one may start.
		n := f.healthN.Load()
		time.Sleep(20 * time.Millisecond)
		if got := f.healthN.Load(); got > n+1 {
			t.Fatalf("%d health checks after Close", got-n)
		}
	})
}

func TestRemoteWarm(t *testing.T) {
	t.Run("waits for ready", func(t *testing.T) {
		f := &fakeServer{ready: func(n int) int {
			if n <= 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}}
		e := newEngine(t, 1, startFake(t, f), nil)
		if err := e.Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := f.readyN.Load(); n != 4 {
			t.Fatalf("%d /ready probes, want 4", n)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		f := &fakeServer{ready: func(int) int { return http.StatusServiceUnavailable }}
		e := newEngine(t, 1, startFake(t, f), engine.Options{remote.OptWarmTimeout: "100ms"})
		start := time.Now()
		err := e.Warm(context.Background())
		if err == nil || !strings.Contains(err.Error(), "not ready after 100ms") || time.Since(start) > 5*time.Second {
			t.Fatalf("err = %v after %s", err, time.Since(start))
		}
	})
	t.Run("server down", func(t *testing.T) {
		url := startFake(t, &fakeServer{})
		e := newEngine(t, 1, url+"/nothing-listens-here/..", engine.Options{remote.OptWarmTimeout: "50ms"})
		if err := e.Warm(context.Background()); err == nil {
			t.Fatal("warm succeeded")
		}
	})
	t.Run("not a stage server", func(t *testing.T) {
		s := httptest.NewServer(http.NotFoundHandler())
		defer s.Close()
		e := newEngine(t, 1, s.URL, nil)
		start := time.Now()
		err := e.Warm(context.Background())
		if err == nil || !strings.Contains(err.Error(), "404") || time.Since(start) > 5*time.Second {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		f := &fakeServer{ready: func(int) int { return http.StatusServiceUnavailable }}
		e := newEngine(t, 1, startFake(t, f), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		if err := e.Warm(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRemoteOptions(t *testing.T) {
	cfg := parse(t, fmt.Sprintf(textPipeline, inprocDeploy))
	framesTail := parse(t, `
pipeline:
  name: f
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: frames, final_output: true}
`)
	skip := parse(t, `
pipeline:
  name: s
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
    - {id: 2, name: c, engine: test-c, input: text, output: text, final_output: true}
  stage_transitions: [[0, 2]]
`)
	for _, tc := range []struct {
		name  string
		stage int
		opts  engine.Options
		want  string
	}{
		{"no endpoint", 1, engine.Options{remote.OptPipeline: cfg}, "option endpoint: missing"},
		{"bad endpoint", 1, engine.Options{remote.OptPipeline: cfg, "endpoint": "10.0.0.1:80"}, `"10.0.0.1:80" is not an http:// or https:// URL`},
		{"no pipeline", 1, engine.Options{"endpoint": "http://a:1"}, "option pipeline: missing"},
		{"pipeline from a file", 1, engine.Options{"endpoint": "http://a:1", "pipeline": "tts"}, "not a config file option"},
		{"bad timeout", 1, engine.Options{"endpoint": "http://a:1", remote.OptPipeline: cfg, "timeout": "soon"}, "option timeout: want a positive duration"},
		{"bad failures", 1, engine.Options{"endpoint": "http://a:1", remote.OptPipeline: cfg, "health_failures": 0}, "option health_failures: must be at least 1"},
		{"missing key file", 1, engine.Options{"endpoint": "http://a:1", remote.OptPipeline: cfg, "payload_key_file": "/nonexistent"}, "option payload_key_file"},
		{"frames tail", 0, engine.Options{"endpoint": "http://a:1", remote.OptPipeline: framesTail}, "ends the route and outputs frames"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, spec := cfg.StageSpec(tc.stage, 0)
			if tc.opts[remote.OptPipeline] == framesTail {
				_, spec = framesTail.StageSpec(tc.stage, 0)
			}
			spec.Options = tc.opts
			_, err := remote.New(spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}

	// Unknown keys are the stage engine's options: ignored.
	_, spec := cfg.StageSpec(1, 0)
	spec.Options = engine.Options{"endpoint": "http://a:1", remote.OptPipeline: cfg, "voice": "slt", "chunks": 2}
	e, err := remote.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()

	// A skipped stage is built (and may be warmed) but refuses work.
	_, spec = skip.StageSpec(1, 0)
	spec.Options = engine.Options{"endpoint": "http://a:1", remote.OptPipeline: skip}
	e, err = remote.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := process(e, "x"); err == nil || !strings.Contains(err.Error(), "not on the route") {
		t.Fatalf("skipped stage: %v", err)
	}
}
