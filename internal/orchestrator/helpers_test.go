package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/pipeline"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// threeStages is a pipeline whose stages all pass audio along, so any route
// over them is valid: stage 0 -> 1 -> 2 by default, plus the aligner.
const threeStages = `
pipeline:
  name: t
  input: text
  stages:
    - {id: 0, name: talker,  engine: test-talker,  input: text,  output: audio, final_output: true}
    - {id: 1, name: vocoder, engine: test-vocoder, input: audio, output: audio, final_output: true}
    - {id: 2, name: post,    engine: test-post,    input: audio, output: audio, final_output: true}
%s
  aligner: {engine: test-aligner}
deploy:
  abort_timeout: %s
%s
`

type fixture struct {
	t     *testing.T
	o     *Orchestrator
	reg   *prometheus.Registry
	hooks *testengine.Hooks
	rec   *recorder
}

// recorder notes what the test engines did.
type recorder struct {
	mu       sync.Mutex
	warmed   map[string]int
	calls    map[string]int // stage name -> Process calls
	replicas map[string]map[int]string
	prepares []string
	engines  map[string]*testengine.Engine
}

func newRecorder() *recorder {
	return &recorder{warmed: map[string]int{}, calls: map[string]int{}, replicas: map[string]map[int]string{}, engines: map[string]*testengine.Engine{}}
}

func (r *recorder) callsOf(stage string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[stage]
}

type setup struct {
	transitions string
	deploy      string
	abortAfter  string
	hooks       testengine.Hooks
	// newErr, when set, is called before the test engines' New builds a
	// replica; an error fails the build.
	newErr func(spec engine.Spec) error
	// opts, when set, adjusts the orchestrator's options.
	opts func(*Options)
}

func newFixture(t *testing.T, s setup) *fixture {
	t.Helper()
	if s.abortAfter == "" {
		s.abortAfter = "5s"
	}
	text := fmt.Sprintf(threeStages, s.transitions, s.abortAfter, s.deploy)
	cfg, err := pipeline.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	rec := newRecorder()
	hooks := s.hooks
	userWarm, userProcess, userPrepare := hooks.Warm, hooks.Process, hooks.Prepare
	hooks.Warm = func(e *testengine.Engine) error {
		rec.mu.Lock()
		rec.warmed[e.ReplicaID()]++
		rec.engines[e.ReplicaID()] = e
		rec.mu.Unlock()
		if userWarm != nil {
			return userWarm(e)
		}
		return nil
	}
	hooks.Process = func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		rec.mu.Lock()
		rec.calls[e.Spec.Name]++
		if rec.replicas[job.RequestID] == nil {
			rec.replicas[job.RequestID] = map[int]string{}
		}
		rec.replicas[job.RequestID][job.StageID] = e.ReplicaID()
		rec.mu.Unlock()
		if userProcess != nil {
			return userProcess(ctx, e, job)
		}
		return nil
	}
	hooks.Prepare = func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		rec.mu.Lock()
		rec.prepares = append(rec.prepares, fmt.Sprintf("%s:%d<-%s", job.RequestID, job.StageID, job.Upstream))
		rec.mu.Unlock()
		if userPrepare != nil {
			return userPrepare(ctx, e, job)
		}
		return nil
	}
	names := []string{"test-talker", "test-vocoder", "test-post", "test-aligner"}
	reg := &engine.Registry{}
	testengine.Register(reg, &hooks, names...)
	if s.newErr != nil {
		wrapped := &engine.Registry{}
		for _, name := range names {
			d, _ := reg.Lookup(name)
			wrapped.Register(name, engine.Driver{Check: d.Check, New: func(spec engine.Spec) (engine.Engine, error) {
				if err := s.newErr(spec); err != nil {
					return nil, err
				}
				return d.New(spec)
			}})
		}
		reg = wrapped
	}
	preg := prometheus.NewRegistry()
	opts := Options{Registry: reg, Registerer: preg}
	if s.opts != nil {
		s.opts(&opts)
	}
	o, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, o: o, reg: preg, hooks: &hooks, rec: rec}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return f
}

// collect reads a stream to its end.
func collect(t *testing.T, s *Stream) ([]OutputChunk, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var outs []OutputChunk
	for {
		out, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return outs, nil
		}
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
}

func texts(outs []OutputChunk) []string {
	var s []string
	for _, o := range outs {
		s = append(s, fmt.Sprintf("%d:%s", o.Stage, o.Chunk.Text.Text))
	}
	return s
}

// assertIdle checks that nothing is held after the requests ended.
func (f *fixture) assertIdle() {
	f.t.Helper()
	st := f.o.Stats()
	if st.InFlight != 0 || st.Bindings() != 0 || st.Draining != 0 {
		f.t.Errorf("not idle: %+v", st)
	}
	for _, s := range st.Stages {
		if s.Queued != 0 {
			f.t.Errorf("stage %d still has %d queued", s.ID, s.Queued)
		}
	}
}

func codeIs(t *testing.T, err error, want Code) {
	t.Helper()
	if got := CodeOf(err); got != want {
		t.Fatalf("error %v has code %q, want %q", err, got, want)
	}
}

func contains(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v does not contain %q", err, want)
	}
}
