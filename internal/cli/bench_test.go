package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/loadgen"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

// tonePipeline is a speech pipeline of test engines: stage a splits the
// text into words, stage tone speaks each word as a tone, so every answer
// streams a chunk of audio per word.
const tonePipeline = `pipeline:
  name: tone
  input: text
  stages:
    - {id: 0, name: a,    engine: test-a,    input: text, output: text}
    - {id: 1, name: tone, engine: test-tone, input: text, output: audio, final_output: true}
deploy:
  abort_timeout: 5s
  stages:
    - {id: 0, max_inflight: 32, options: {split: true}}
    - {id: 1, max_inflight: 32}
`

// toneEngines registers the tone pipeline's engines, with hooks on test-a.
func toneEngines(hooks *testengine.Hooks) func(*engine.Registry) {
	return func(r *engine.Registry) {
		testengine.Register(r, hooks, "test-a")
		testengine.RegisterTone(r, "test-tone")
	}
}

// noLeaks checks, after the test's other cleanups (its server's stop),
// that it left no goroutine behind.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// startToneServer runs the API over the tone pipeline on a loopback port,
// its orchestrator's metrics in reg, which /metrics serves.
func startToneServer(t *testing.T, hooks *testengine.Hooks) (url string, reg *prometheus.Registry) {
	t.Helper()
	reg = prometheus.NewRegistry()
	engines := &engine.Registry{}
	toneEngines(hooks)(engines)
	srv := apitest.Start(t, testkit.Parse(t, tonePipeline), orchestrator.Options{Registry: engines, Registerer: reg}, api.Options{Registry: reg})
	return srv.URL, reg
}

// runBench runs the bench command with env's engines (none: a release's).
func runBench(t *testing.T, engines func(*engine.Registry), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Engines: engines}
	code = Main(context.Background(), env, append([]string{"bench"}, args...))
	return out.String(), errb.String(), code
}

// decodeReport decodes bench --json's output, checking that it is one
// object with exactly the documented keys.
func decodeReport(t *testing.T, stdout string) loadgen.Report {
	t.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &keys); err != nil {
		t.Fatalf("bench --json printed no JSON object: %v\n%s", err, stdout)
	}
	want := []string{"aborted", "audio_seconds", "audio_seconds_per_second", "duration_s", "errors", "latency_ms", "leaks", "ok", "requests", "rps", "rtf", "ttfa_ms", "underruns"}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(keys)); !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	var rep loadgen.Report
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	return rep
}

// checkConsistent checks what holds in every report: the counts add up
// and the percentiles are ordered.
func checkConsistent(t *testing.T, rep loadgen.Report) {
	t.Helper()
	errs := 0
	for _, n := range rep.Errors {
		errs += n
	}
	if rep.Requests != rep.OK+rep.Aborted+errs {
		t.Errorf("requests %d != ok %d + aborted %d + errors %d", rep.Requests, rep.OK, rep.Aborted, errs)
	}
	for name, p := range map[string]loadgen.Percentiles{"latency_ms": rep.LatencyMs, "ttfa_ms": rep.TTFAMs} {
		if !(0 <= p.P50 && p.P50 <= p.P90 && p.P90 <= p.P99 && p.P99 <= p.Max) {
			t.Errorf("%s out of order: %+v", name, p)
		}
	}
	if u := rep.Underruns; u.Events < u.Requests || u.Requests > rep.OK+rep.Aborted || u.MaxStallMs > u.StallMs || (u.Events == 0) != (u.StallMs == 0) {
		t.Errorf("underruns inconsistent: %+v", u)
	}
	if rep.OK > 0 && (rep.LatencyMs.Max <= 0 || rep.TTFAMs.P50 > rep.LatencyMs.Max || rep.RTF <= 0 || rep.RPS <= 0 || rep.AudioSecondsPerSecond <= 0) {
		t.Errorf("a run with ok requests reports %+v", rep)
	}
}

// checkNoErrors checks that a report has no error and a clean leak check.
func checkNoErrors(t *testing.T, rep loadgen.Report) {
	t.Helper()
	if len(rep.Errors) != 0 {
		t.Errorf("errors %v", rep.Errors)
	}
	if !rep.Leaks.OK || rep.Leaks.InFlight != 0 || rep.Leaks.Bindings != 0 || len(rep.Leaks.ByStage) != 2 {
		t.Errorf("leaks %+v", rep.Leaks)
	}
}

func TestBenchJSON(t *testing.T) {
	noLeaks(t)
	url, _ := startToneServer(t, nil)
	stdout, stderr, code := runBench(t, nil, "--url", url, "-n", "30", "-c", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep := decodeReport(t, stdout)
	checkConsistent(t, rep)
	checkNoErrors(t, rep)
	if rep.Requests != 30 || rep.OK != 30 || rep.Aborted != 0 {
		t.Errorf("%d requests, %d ok, %d aborted", rep.Requests, rep.OK, rep.Aborted)
	}
}

func TestBenchAbortHalf(t *testing.T) {
	noLeaks(t)
	url, _ := startToneServer(t, nil)
	const n = 60
	stdout, stderr, code := runBench(t, nil, "--url", url, "-n", fmt.Sprint(n), "-c", "4", "--abort-ratio", "0.5", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep := decodeReport(t, stdout)
	checkConsistent(t, rep)
	checkNoErrors(t, rep)
	// The requests to abort are drawn at random, each with probability
	// 0.5: within 4 standard deviations (sqrt(n)/2) of half.
	if rep.Requests != n || rep.Aborted < n/2-16 || rep.Aborted > n/2+16 || rep.OK != n-rep.Aborted {
		t.Errorf("%d requests, %d aborted, %d ok; want about half of %d aborted", rep.Requests, rep.Aborted, rep.OK, n)
	}
}

func TestBenchReusedIDs(t *testing.T) {
	noLeaks(t)
	url, _ := startToneServer(t, nil)
	// Two ids for three workers, half the requests aborted: an id whose
	// request was hung up on is reused only once the server let go of it,
	// so no request meets a 409.
	stdout, stderr, code := runBench(t, nil, "--url", url, "-n", "30", "-c", "3", "--reuse-ids", "2", "--abort-ratio", "0.5", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep := decodeReport(t, stdout)
	checkConsistent(t, rep)
	checkNoErrors(t, rep)
	if rep.Requests != 30 || rep.Aborted == 0 {
		t.Errorf("%d requests, %d aborted", rep.Requests, rep.Aborted)
	}
}

func TestBenchInProcess(t *testing.T) {
	noLeaks(t)
	cfg := writeConfig(t, tonePipeline)
	for _, turns := range []string{"--turns=true", "--turns=false"} {
		stdout, stderr, code := runBench(t, toneEngines(nil), "--config", cfg, "-n", "30", "-c", "3", "--abort-ratio", "0.5", "--json", turns)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", turns, code, stderr)
		}
		rep := decodeReport(t, stdout)
		checkConsistent(t, rep)
		checkNoErrors(t, rep)
		if rep.Requests != 30 || rep.Aborted == 0 || rep.OK == 0 {
			t.Errorf("%s: %d requests, %d ok, %d aborted", turns, rep.Requests, rep.OK, rep.Aborted)
		}
		if !strings.Contains(stderr, "pipeline tone in process") {
			t.Errorf("%s: stderr: %s", turns, stderr)
		}
	}
}

// TestBenchTimestamps loads the built-in pipeline, in process and over
// HTTP, with requests that ask for word timestamps too; in process, a
// pipeline without an aligner is refused.
func TestBenchTimestamps(t *testing.T) {
	noLeaks(t)
	cfg, err := pipeline.Builtin("tts")
	if err != nil {
		t.Fatal(err)
	}
	reg, engines := prometheus.NewRegistry(), &engine.Registry{}
	shipped.Register(engines, io.Discard)
	srv := apitest.Start(t, cfg, orchestrator.Options{Registry: engines, Registerer: reg}, api.Options{Registry: reg})
	for _, target := range [][]string{{"--config", "builtin:tts"}, {"--url", srv.URL}} {
		stdout, stderr, code := runBench(t, nil, append(target, "-n", "6", "-c", "3", "--timestamps", "--json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", target, code, stderr)
		}
		rep := decodeReport(t, stdout)
		checkConsistent(t, rep)
		if rep.Requests != 6 || rep.OK != 6 || !rep.Leaks.OK || len(rep.Leaks.ByStage) != 3 {
			t.Errorf("%v: %d requests, %d ok, errors %v, leaks %+v; want 6 ok and the aligner's bindings let go too", target, rep.Requests, rep.OK, rep.Errors, rep.Leaks)
		}
	}
	_, stderr, code := runBench(t, toneEngines(nil), "--config", writeConfig(t, tonePipeline), "-n", "1", "--timestamps")
	if code != ExitUsage || !strings.Contains(stderr, "--timestamps: pipeline tone has no aligner") {
		t.Errorf("tone pipeline with --timestamps: exit %d, stderr %q", code, stderr)
	}
}

// holdHooks make stage a hold its binding: after its first word it waits
// for its request to be aborted, then ignores the abort until release is
// closed, as an engine stuck in a C call would.
func holdHooks(release <-chan struct{}) *testengine.Hooks {
	return &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if n == 0 {
			return nil
		}
		<-ctx.Done()
		<-release
		return ctx.Err()
	}}
}

func TestBenchAbortByDelete(t *testing.T) {
	noLeaks(t)
	// Stage a stops after its first word until its request is aborted, so
	// every DELETE finds its request running and drains it.
	hooks := &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if n == 0 {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	url, reg := startToneServer(t, hooks)
	const n = 6
	stdout, stderr, code := runBench(t, nil, "--url", url, "-n", fmt.Sprint(n), "-c", "3", "--abort-ratio", "1", "--abort-mode", "delete", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep := decodeReport(t, stdout)
	checkConsistent(t, rep)
	checkNoErrors(t, rep)
	if rep.Aborted != n {
		t.Errorf("%d aborted, want %d", rep.Aborted, n)
	}
	if got := counter(t, reg, "omnistage_aborts_total", "result", "drained"); got != n {
		t.Errorf("the server drained %v aborts, want %d", got, n)
	}
}

// counter returns the value of the counter name{label=value} in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestBenchLeakCheckFails(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	url, _ := startToneServer(t, holdHooks(release))
	// Registered after the server's, so it runs before the server stops.
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })

	// Every request is hung up on at its first audio (no request of its
	// text has ended, so there is nothing to place a later point by), and
	// every one stays in flight on the server with both its bindings.
	const n = 4
	stdout, stderr, code := runBench(t, nil, "--url", url, "-n", fmt.Sprint(n), "-c", "2", "--abort-ratio", "1", "--abort-mode", "hangup", "--leak-wait", "300ms", "--json")
	if code != ExitFailure {
		t.Errorf("exit %d, want %d: %s", code, ExitFailure, stderr)
	}
	rep := decodeReport(t, stdout)
	checkConsistent(t, rep)
	if rep.Requests != n || rep.Aborted != n || len(rep.Errors) != 0 {
		t.Errorf("%d requests, %d aborted, errors %v; want %d aborted and no error", rep.Requests, rep.Aborted, rep.Errors, n)
	}
	l := rep.Leaks
	if l.OK || l.InFlight != n || l.Bindings != 2*n || l.ByStage["0"] != n || l.ByStage["1"] != n || !strings.Contains(l.Error, "still held") {
		t.Errorf("leaks %+v; want %d in flight, %d bindings on each stage, not ok", l, n, n)
	}
	if !strings.Contains(stderr, "the leak check failed") {
		t.Errorf("stderr does not say the leak check failed:\n%s", stderr)
	}

	// The text report says so too.
	stdout, _, code = runBench(t, nil, "--url", url, "-n", "1", "--abort-ratio", "1", "--abort-mode", "hangup", "--leak-wait", "100ms")
	if code != ExitFailure || !strings.Contains(stdout, "leak check   FAILED") {
		t.Errorf("exit %d, report:\n%s", code, stdout)
	}
}

func TestBenchCountsErrors(t *testing.T) {
	noLeaks(t)
	// Stage a fails on texts that ask it to.
	hooks := &testengine.Hooks{Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
		if strings.Contains(job.Prompt.Text, "fail") {
			return fmt.Errorf("asked to fail")
		}
		return nil
	}}
	url, _ := startToneServer(t, hooks)
	texts := filepath.Join(t.TempDir(), "texts.txt")
	if err := os.WriteFile(texts, []byte("please fail now\n\nall is well here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runBench(t, nil, "--url", url, "-n", "10", "-c", "2", "--texts", texts, "--json")
	if code != ExitFailure {
		t.Errorf("exit %d, want %d: %s", code, ExitFailure, stderr)
	}
	rep := decodeReport(t, stdout)
	checkConsistent(t, rep)
	if rep.OK != 5 || rep.Errors["stage_failed"] != 5 || len(rep.Errors) != 1 || !rep.Leaks.OK {
		t.Errorf("ok %d, errors %v, leaks %+v; want 5 ok and 5 stage_failed", rep.OK, rep.Errors, rep.Leaks)
	}
	if !strings.Contains(stderr, "5 of 10 requests failed") {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestBenchUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-n", "1"}, "give either --url or --config"},
		{[]string{"--url", "http://127.0.0.1:1", "--config", "x"}, "give either --url or --config"},
		{[]string{"--url", "http://127.0.0.1:1", "-n", "1", "--duration", "1s"}, "give either -n or --duration"},
		{[]string{"--url", "http://127.0.0.1:1", "-c", "1", "--rate", "1"}, "give either -c or --rate"},
		{[]string{"--url", "http://127.0.0.1:1", "--abort-ratio", "2"}, "outside 0..1"},
		{[]string{"--url", "http://127.0.0.1:1", "--abort-mode", "later"}, "unknown abort mode"},
		{[]string{"--url", "http://127.0.0.1:1", "-c", "0"}, "either a concurrency or a rate"},
		{[]string{"--url", "http://127.0.0.1:1", "--texts", "/nonexistent"}, "--texts"},
		{[]string{"--url", "127.0.0.1:1"}, "want http://HOST:PORT"},
		{[]string{"--config", "builtin:tts", "--model", "m"}, "--model: no pipeline m among those served (tts)"},
		{[]string{"--config", "builtin:tts", "--api-key-file", "k"}, "--api-key-file goes with --url"},
		{[]string{"--url", "http://127.0.0.1:1", "--turns=false"}, "--turns goes with --config"},
		{[]string{"--url", "http://127.0.0.1:1", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		_, stderr, code := runBench(t, nil, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}

func TestBenchHelpDocumentsEveryKey(t *testing.T) {
	_, stderr, code := runBench(t, nil, "-h")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	data, err := json.Marshal(loadgen.Report{})
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if !strings.Contains(stderr, "\n  "+k+" ") {
			t.Errorf("bench -h does not document the key %q", k)
		}
	}
	for _, k := range []string{"inflight", "bindings", "bindings_by_stage", "p50", "p90", "p99", "max", "events", "stall_ms", "max_stall_ms"} {
		if !strings.Contains(stderr, k) {
			t.Errorf("bench -h does not document %q", k)
		}
	}
}
