package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/pool"
	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/remote"
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
	// The stage server's refusal is this side's failure (a 502 with its
	// code), never the client's or a 500.
	var ue *engine.UpstreamError
	if !errors.As(err, &ue) || ue.Status != 400 || ue.Code != payload.CodeKeyUnknown || orchestrator.CodeOf(err) != orchestrator.CodeUpstream {
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
	testkit.Eventually(t, "the replica to be lost", func() bool { return o.Stats().Stages[1].Healthy == 0 })
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

func startFake(t *testing.T, f *fakeServer) string { return apitest.Handler(t, f) }

// newEngine builds a replica of stage of textPipeline at url, with the call
// settings h.
func newEngine(t *testing.T, stage int, url string, h pipeline.Link) *remote.Engine {
	t.Helper()
	cfg := testkit.Parse(t, fmt.Sprintf(textPipeline, inprocDeploy))
	_, spec := cfg.StageSpec(stage, 0)
	e, err := remote.New(remote.Config{Stage: spec, Pipeline: cfg, Endpoint: url, Client: &hop.Client{HTTP: hop.NewHTTPClient()}, Link: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// streamAnswer writes the headers of a streamed answer that goes on to
// stage next (finished: is the final output of stage next), and body.
func streamAnswer(w http.ResponseWriter, next int, finished bool, body []byte) {
	w.Header().Set("Content-Type", hop.ContentType)
	w.Header().Set(hop.HeaderStage, fmt.Sprint(next))
	w.Header().Set(hop.HeaderFinished, fmt.Sprint(finished))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
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
		// The server dies while running the stage: its answer breaks off
		// after the headers, the stream reset.
		streamAnswer(w, 2, false, nil)
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}}
	e := newEngine(t, 1, startFake(t, f), pipeline.Link{})
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
		{"200 not finished, garbage stream", 0, "garbage", func(err error) bool {
			var pe *payload.Error
			return errors.As(err, &pe) && pe.Code == payload.CodeBadMagic
		}},
		{"200 finished too early", 1, "", func(err error) bool {
			return strings.Contains(err.Error(), "same pipeline")
		}},
		{"200 wrong next stage", 2, "", func(err error) bool {
			return strings.Contains(err.Error(), "successor is stage 2")
		}},
		{"200 not a stream", 3, "", func(err error) bool {
			return strings.Contains(err.Error(), "not a stream")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{run: func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tc.status >= 100:
					w.WriteHeader(tc.status)
					fmt.Fprint(w, tc.body)
				case tc.status == 0:
					streamAnswer(w, 2, false, []byte(tc.body))
				case tc.status == 1:
					streamAnswer(w, 1, true, nil)
				case tc.status == 2:
					streamAnswer(w, 0, false, nil)
				default:
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, `{"request_id":"r1","stage_id":2,"finished":false,"stage_input":"x"}`)
				}
			}}
			e := newEngine(t, 1, startFake(t, f), pipeline.Link{})
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
	e := newEngine(t, 1, startFake(t, f), pipeline.Link{Timeout: 50 * time.Millisecond})
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
	opts := pipeline.Link{HealthInterval: 2 * time.Millisecond, HealthFailures: 3}

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
		testkit.Eventually(t, "health checks", func() bool { return f.healthN.Load() >= 3 })
		if isLost(e) {
			t.Fatal("lost while healthy")
		}
		down.Store(true)
		testkit.Eventually(t, "the replica to be lost", func() bool { return isLost(e) })
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
		testkit.Eventually(t, "health checks", func() bool { return f.healthN.Load() >= 20 || isLost(e) })
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
		testkit.Eventually(t, "health checks", func() bool { return f.healthN.Load() >= 1 })
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
		e := newEngine(t, 1, startFake(t, f), pipeline.Link{})
		if err := e.Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := f.readyN.Load(); n != 4 {
			t.Fatalf("%d /ready probes, want 4", n)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		f := &fakeServer{ready: func(int) int { return http.StatusServiceUnavailable }}
		e := newEngine(t, 1, startFake(t, f), pipeline.Link{WarmTimeout: 100 * time.Millisecond})
		start := time.Now()
		err := e.Warm(context.Background())
		if err == nil || !strings.Contains(err.Error(), "not ready after 100ms") || time.Since(start) > 5*time.Second {
			t.Fatalf("err = %v after %s", err, time.Since(start))
		}
	})
	t.Run("server down", func(t *testing.T) {
		url := startFake(t, &fakeServer{})
		e := newEngine(t, 1, url+"/nothing-listens-here/..", pipeline.Link{WarmTimeout: 50 * time.Millisecond})
		if err := e.Warm(context.Background()); err == nil {
			t.Fatal("warm succeeded")
		}
	})
	t.Run("not a stage server", func(t *testing.T) {
		s := httptest.NewServer(http.NotFoundHandler())
		defer s.Close()
		e := newEngine(t, 1, s.URL, pipeline.Link{})
		start := time.Now()
		err := e.Warm(context.Background())
		if err == nil || !strings.Contains(err.Error(), "404") || time.Since(start) > 5*time.Second {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		f := &fakeServer{ready: func(int) int { return http.StatusServiceUnavailable }}
		e := newEngine(t, 1, startFake(t, f), pipeline.Link{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		if err := e.Warm(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRemoteConfig(t *testing.T) {
	cfg := testkit.Parse(t, fmt.Sprintf(textPipeline, inprocDeploy))
	skip := testkit.Parse(t, `
pipeline:
  name: s
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
    - {id: 2, name: c, engine: test-c, input: text, output: text, final_output: true}
  stage_transitions: [[0, 2]]
`)
	_, spec := cfg.StageSpec(1, 0)
	for _, tc := range []struct {
		name string
		cfg  remote.Config
		want string
	}{
		{"no endpoint", remote.Config{Stage: spec, Pipeline: cfg}, `endpoint "" is not an http:// or https:// URL`},
		{"bad endpoint", remote.Config{Stage: spec, Pipeline: cfg, Endpoint: "10.0.0.1:80"}, `"10.0.0.1:80" is not an http:// or https:// URL`},
		{"no pipeline", remote.Config{Stage: spec, Endpoint: "http://a:1"}, "no pipeline"},
		{"bad failures", remote.Config{Stage: spec, Pipeline: cfg, Endpoint: "http://a:1", Link: pipeline.Link{HealthFailures: -1}}, "health_failures must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := remote.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}

	// A skipped stage is built (and may be warmed) but refuses work.
	_, spec = skip.StageSpec(1, 0)
	e, err := remote.New(remote.Config{Stage: spec, Pipeline: skip, Endpoint: "http://a:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := process(e, "x"); err == nil || !strings.Contains(err.Error(), "not on the route") {
		t.Fatalf("skipped stage: %v", err)
	}

	// A missing api_key_file fails the replica's build, naming the file.
	place := &remote.Placement{Pipeline: cfg}
	d := cfg.Deploy.Stages[1]
	d.Link.APIKeyFile = "/nonexistent/key"
	if _, err := place.Supervise(spec, &d, pool.Config{}); err == nil || !strings.Contains(err.Error(), "api_key_file") || !strings.Contains(err.Error(), "/nonexistent/key") {
		t.Fatalf("missing key file: %v", err)
	}
	// A key the stage servers would refuse is refused here too.
	d.Link.APIKeyFile = filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(d.Link.APIKeyFile, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := place.Supervise(spec, &d, pool.Config{}); err == nil || !strings.Contains(err.Error(), "the key is 5 bytes long") {
		t.Fatalf("short key file: %v", err)
	}
}

// TestRemoteRefusedMovesRequest: with one of a stage's two servers gone
// (its connections refused) and no health check to notice it yet, the
// requests bound to it move to the other one before anything was sent, and
// all of them succeed; the gone one is out of service at once.
func TestRemoteRefusedMovesRequest(t *testing.T) {
	// The server that goes: it answers its probes on connections it then
	// closes (none is left idle in the client's pool when it goes, to be
	// reused and cut after the request was written), and is never called.
	gone := httptest.NewServer(&fakeServer{
		ready:  func(int) int { return http.StatusOK },
		health: func(int) int { return http.StatusOK },
		run:    func(w http.ResponseWriter, r *http.Request) { t.Error("the gone server was called") },
	})
	gone.Config.SetKeepAlivesEnabled(false)
	alive := startStageServer(t, fmt.Sprintf(textPipeline, inprocDeploy), 1, "")
	deploy := fmt.Sprintf("    - {id: 0}\n    - {id: 1, placement: remote, endpoints: [%q, %q], health_interval: 1h}\n    - {id: 2}\n", gone.URL, alive)
	o := startLocal(t, fmt.Sprintf(textPipeline, deploy), nil)
	gone.Close()
	for i := range 4 {
		if _, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: fmt.Sprint("hi ", i)}}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if st := o.Stats().Stages[1]; st.Healthy != 1 {
		t.Errorf("%d healthy replicas of stage 1, want 1: the refusing one must be out of service at once", st.Healthy)
	}
}
