package remote_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// textPipeline is three text stages of test engines: each appends its mark
// to every chunk's trace. Stage 0 emits two chunks per input chunk, so
// payloads carry more than one chunk. deploy is the deploy section's stage
// list.
const textPipeline = `
pipeline:
  name: text
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text}
    - {id: 2, name: c, engine: test-c, input: text, output: text, final_output: true}
deploy:
  abort_timeout: 5s
  stages:
%s
`

var testEngines = []string{"test-a", "test-b", "test-c"}

// inprocDeploy deploys every stage of textPipeline in process.
const inprocDeploy = `
    - {id: 0, options: {chunks: 2}}
    - {id: 1}
    - {id: 2}
`

// startStageServer runs a real headless stage server (api package) for
// stage of the pipeline in yaml, and returns its base URL. It stops when
// the test ends.
func startStageServer(t testing.TB, yaml string, stage int, key string) string {
	t.Helper()
	url, _ := startStageServerStop(t, yaml, stage, key)
	return url
}

// startStageServerStop is startStageServer that also returns a function
// stopping the server (it is also stopped when the test ends).
func startStageServerStop(t testing.TB, yaml string, stage int, key string) (string, func()) {
	t.Helper()
	return startStageServerWith(t, yaml, stage, key, registerTestEngines)
}

func registerTestEngines(r *engine.Registry) { testengine.Register(r, nil, testEngines...) }

// startStageServerWith is startStageServerStop with the engines register
// adds.
func startStageServerWith(t testing.TB, yaml string, stage int, key string, register func(*engine.Registry)) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startStageServerOn(t, ln, yaml, stage, key, register)
}

// startStageServerOn is startStageServerWith serving on ln, answering to
// the names of hosts too (a server answers only to its addresses and
// loopback names otherwise).
func startStageServerOn(t testing.TB, ln net.Listener, yaml string, stage int, key string, register func(*engine.Registry), hosts ...string) (string, func()) {
	t.Helper()
	cfg := testkit.Parse(t, yaml)
	reg := &engine.Registry{}
	register(reg)
	orch, err := orchestrator.New(cfg, orchestrator.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New([]*orchestrator.Orchestrator{orch}, api.Options{Stage: &stage, Codec: payload.NewCodec([]byte(key)), ShutdownTimeout: 5 * time.Second, AllowedHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stage server %d: %v", stage, err)
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// startLocal builds and starts an orchestrator for yaml whose remote stages
// reach their servers through the remote placement, signing with codec
// (nil: unsigned).
func startLocal(t testing.TB, yaml string, codec *payload.Codec) *orchestrator.Orchestrator {
	t.Helper()
	return startLocalWith(t, yaml, codec, registerTestEngines)
}

// startLocalWith is startLocal with the engines register adds.
func startLocalWith(t testing.TB, yaml string, codec *payload.Codec, register func(*engine.Registry)) *orchestrator.Orchestrator {
	t.Helper()
	cfg := testkit.Parse(t, yaml)
	reg := &engine.Registry{}
	register(reg)
	if codec == nil {
		codec = payload.NewCodec(nil)
	}
	return orchtest.Start(t, cfg, orchestrator.Options{Registry: reg, Placements: placements(&remote.Placement{Pipeline: cfg, Codec: codec})}, 10*time.Second)
}

// generate runs one request and returns the final output's text, chunks
// joined.
func generate(o *orchestrator.Orchestrator, req orchestrator.Request) (string, error) {
	outs, err := outputs(o, req)
	var b strings.Builder
	for _, out := range outs {
		if out.Final && out.Chunk.Text != nil {
			b.WriteString(out.Chunk.Text.Text)
		}
	}
	return b.String(), err
}

// outputs runs one request and returns its outputs.
func outputs(o *orchestrator.Orchestrator, req orchestrator.Request) ([]orchestrator.OutputChunk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := o.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var outs []orchestrator.OutputChunk
	for {
		out, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return outs, nil
		}
		if err != nil {
			return nil, err
		}
		outs = append(outs, out)
	}
}

// remoteDeploy deploys textPipeline with the stages in urls placed remote,
// each with the deploy keys in extra ("health_interval: 5ms").
func remoteDeploy(urls map[int]string, extra string) string {
	var b strings.Builder
	for id := range 3 {
		opts := ""
		if id == 0 {
			opts = "chunks: 2"
		}
		if u, ok := urls[id]; ok {
			if extra != "" {
				extra = ", " + extra
			}
			fmt.Fprintf(&b, "    - {id: %d, placement: remote, endpoints: [%q], options: {%s}%s}\n", id, u, opts, extra)
			continue
		}
		fmt.Fprintf(&b, "    - {id: %d, options: {%s}}\n", id, opts)
	}
	return b.String()
}

// placements are an orchestrator's placements with p as its remote one.
func placements(p *remote.Placement) map[pipeline.Placement]orchestrator.Placement {
	return map[pipeline.Placement]orchestrator.Placement{pipeline.PlacementRemote: p}
}
