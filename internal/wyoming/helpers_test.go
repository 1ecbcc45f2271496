package wyoming

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mainYAML is the default test pipeline: the speaker alone, at 16 kHz,
// with an alias.
const mainYAML = `
voice_aliases: {bobby: bob}
pipeline:
  name: main
  input: text
  stages:
    - {id: 0, name: talker, engine: test-speaker, input: text, output: audio, final_output: true}
deploy:
  abort_timeout: 5s
`

// altYAML is a second pipeline: the speaker at 24 kHz, with an alias.
const altYAML = `
voice_aliases: {robert: bob}
pipeline:
  name: alt
  input: text
  stages:
    - {id: 0, name: talker, engine: test-speaker, input: text, output: audio, final_output: true}
deploy:
  abort_timeout: 5s
  stages:
    - {id: 0, options: {rate: 24000}}
`

// fixture is a Wyoming server on a loopback port over the main and alt
// pipelines.
type fixture struct {
	addr  string
	hooks *speakerHooks
	orchs []*orchestrator.Orchestrator
	srv   *Server
	reg   *prometheus.Registry
	stop  func() error // ends Run and returns its error
}

// serve starts a fixture with opts over the test pipelines (its
// Registerer and Logger are set here). The server is stopped when the
// test ends.
func serve(t *testing.T, opts Options) *fixture {
	t.Helper()
	hooks := newSpeakerHooks()
	engines := &engine.Registry{}
	registerSpeaker(engines, hooks)
	f := start(t, engines, opts, testkit.Parse(t, mainYAML), testkit.Parse(t, altYAML))
	f.hooks = hooks
	t.Cleanup(hooks.release) // before the server stops
	return f
}

// start starts the pipelines cfgs on engines and a server over them.
func start(t *testing.T, engines *engine.Registry, opts Options, cfgs ...*pipeline.Config) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry()}
	requests := orchestrator.NewRequests()
	for _, cfg := range cfgs {
		f.orchs = append(f.orchs, orchtest.Start(t, cfg, orchestrator.Options{Registry: engines, Requests: requests,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": cfg.Pipeline.Name}, f.reg)}, 30*time.Second))
	}
	opts.Registerer = f.reg
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(f.orchs, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	stopped := false
	var runErr error
	f.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := f.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f
}

// testWriter writes log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// direct returns the audio o makes of text, asked directly, for
// comparison with what the server relays.
func direct(t testing.TB, o *orchestrator.Orchestrator, text string) []int16 {
	t.Helper()
	return orchtest.CollectSpeech(t, o, orchestrator.Request{Prompt: engine.Prompt{Text: text}}).Samples
}

// inFlight returns the requests in flight in every pipeline, from the
// metrics.
func (f *fixture) inFlight(t *testing.T) float64 {
	t.Helper()
	return gather(t, f.reg, "omnistage_requests_inflight")
}

// gather sums the values of the metric name in reg.
func gather(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			}
		}
	}
	return sum
}
