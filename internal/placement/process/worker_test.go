package process_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/pool"
	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/process"
	"github.com/omnistage/omnistage/internal/subprocess"
)

// textPipeline is three text stages of test engines, each appending its
// mark to every chunk's trace; stage 0 emits two chunks per input chunk, so
// a worker gets more than one. Stage 1 has two replicas placed as the
// argument says.
const textPipeline = `
pipeline:
  name: text
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text}
    - {id: 2, name: c, engine: test-c, input: text, output: text, final_output: true}%s
deploy:
  abort_timeout: 5s
  stages:
    - {id: 0, options: {chunks: 2}}
    - {id: 1, replicas: 2, placement: %s}
    - {id: 2}
`

func textConfig(placement string) string { return fmt.Sprintf(textPipeline, "", placement) }

// writeConfig writes yaml to a file and loads it, as the worker will.
func writeConfig(t testing.TB, yaml string) *pipeline.Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := pipeline.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fixture is a started orchestrator whose process stages run in workers.
type fixture struct {
	o      *orchestrator.Orchestrator
	output *testkit.SyncBuffer // the workers' stderr

	mu      sync.Mutex
	workers []*process.Engine
	stages  []int // workers[i]'s stage
}

func (f *fixture) worker(i int) *process.Engine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.workers[i]
}

// start builds and starts an orchestrator for cfg with the engines
// register adds and a worker placement that records its replicas
// (restarted ones too, in order), adjusting its options with opts.
func start(t testing.TB, cfg *pipeline.Config, register func(*engine.Registry), opts ...func(*orchestrator.Options)) *fixture {
	t.Helper()
	f := &fixture{output: &testkit.SyncBuffer{}}
	reg := &engine.Registry{}
	register(reg)
	place := &recordingPlacement{Placement: process.Placement{Pipeline: cfg, Stderr: f.output}, f: f}
	oopts := orchestrator.Options{Registry: reg, Placements: map[pipeline.Placement]orchestrator.Placement{pipeline.PlacementProcess: place}}
	for _, set := range opts {
		set(&oopts)
	}
	// Registered first, so it runs after the shutdown and shows everything.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("workers' output:\n%s", f.output)
		}
	})
	f.o = orchtest.Start(t, cfg, oopts, 30*time.Second)
	return f
}

// recordingPlacement is the process placement, recording the workers it
// starts in its fixture.
type recordingPlacement struct {
	process.Placement
	f *fixture
}

func (p *recordingPlacement) Supervise(spec engine.Spec, d *pipeline.DeployStage, cfg pool.Config) (*pool.Supervisor, error) {
	return pool.Supervise(cfg, func(i int) (engine.Engine, error) {
		spec := spec
		spec.Replica = i
		e, err := p.New(spec, d)
		if err == nil {
			p.f.mu.Lock()
			p.f.workers = append(p.f.workers, e)
			p.f.stages = append(p.f.stages, spec.StageID)
			p.f.mu.Unlock()
		}
		return e, err
	})
}

func registerTestEngines(r *engine.Registry) { testengine.Register(r, nil, testEngines...) }

// request is a text request whose stage 1 gets the tag param.
func request(text, tag string) orchestrator.Request {
	req := orchestrator.Request{Prompt: engine.Prompt{Text: text}}
	if tag != "" {
		req.Params = []json.RawMessage{nil, json.RawMessage(fmt.Sprintf(`{"tag": %q}`, tag)), nil}
	}
	return req
}

// result is a request's final chunks' texts, or its error.
type result struct {
	chunks []string
	err    error
}

func (r result) text() string { return strings.Join(r.chunks, " / ") }

// run runs one request to its end.
func run(o *orchestrator.Orchestrator, req orchestrator.Request) result {
	s, err := o.Submit(context.Background(), req)
	if err != nil {
		return result{err: err}
	}
	return collect(s)
}

func collect(s *orchestrator.Stream) result {
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r result
	for {
		out, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			r.err = err
			return r
		}
		if out.Final && out.Chunk.Text != nil {
			r.chunks = append(r.chunks, out.Chunk.Text.Text)
		}
	}
}

// TestProcessMatchesInproc runs the same requests, concurrently, with
// stage 1's two replicas in process and in two workers: outputs, and the
// error of a request its engine refuses, are the same.
func TestProcessMatchesInproc(t *testing.T) {
	inproc := start(t, writeConfig(t, textConfig("inproc")), registerTestEngines)
	procs := start(t, writeConfig(t, textConfig("process")), registerTestEngines)

	reqs := []orchestrator.Request{
		request("one", ""),
		request("two words", "x"),
		request("three", "y"),
		request("four and more", ""),
		request("five", "z"),
		request("six", ""),
		{Prompt: engine.Prompt{Text: "refused"}, Params: []json.RawMessage{nil, json.RawMessage(`{"fail": true}`), nil}},
	}
	runAll := func(o *orchestrator.Orchestrator) []result {
		out := make([]result, len(reqs))
		var wg sync.WaitGroup
		for i, req := range reqs {
			wg.Go(func() { out[i] = run(o, req) })
		}
		wg.Wait()
		return out
	}
	want, got := runAll(inproc.o), runAll(procs.o)
	for i := range reqs {
		w, g := want[i], got[i]
		if w.err != nil {
			if g.err == nil || orchestrator.CodeOf(g.err) != orchestrator.CodeOf(w.err) {
				t.Errorf("request %d: error %v, want one like %v", i, g.err, w.err)
			}
			continue
		}
		if g.err != nil {
			t.Errorf("request %d: %v", i, g.err)
			continue
		}
		if len(w.chunks) != 2 || !reflect.DeepEqual(g.chunks, w.chunks) {
			t.Errorf("request %d: got %q, want %q (in process)", i, g.text(), w.text())
		}
	}
	if orchestrator.CodeOf(want[len(reqs)-1].err) != orchestrator.CodeBadRequest {
		t.Errorf("refused request: %v, want a bad request", want[len(reqs)-1].err)
	}
	if p0, p1 := procs.worker(0).Pid(), procs.worker(1).Pid(); p0 == p1 || p0 == os.Getpid() {
		t.Errorf("worker pids %d and %d, this process %d", p0, p1, os.Getpid())
	}
}

// TestCrashLosesOnlyItsWorker crashes one worker in the middle of a request
// while a request runs on the other: the first fails as replica lost,
// naming the stage and replica; the second completes, and later requests
// go to the surviving worker (the crashed one is not restarted within the
// test).
func TestCrashLosesOnlyItsWorker(t *testing.T) {
	for _, tc := range []struct{ tag, state string }{
		{"crash", "exit status 3"},
		{"panic", "exit status 2"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			f := start(t, writeConfig(t, textConfig("process")), registerTestEngines, func(o *orchestrator.Options) { o.RestartBackoff = time.Hour })
			gate := filepath.Join(t.TempDir(), "gate")

			// Bound to b/0, the least loaded; it waits in its worker.
			held, err := f.o.Submit(context.Background(), request("held", "gate:"+gate))
			if err != nil {
				t.Fatal(err)
			}
			heldDone := make(chan result, 1)
			go func() { heldDone <- collect(held) }()

			// Bound to b/1, whose worker dies running it.
			r := run(f.o, request("doomed", tc.tag))
			var lost *orchestrator.ReplicaLostError
			if !errors.As(r.err, &lost) || orchestrator.CodeOf(r.err) != orchestrator.CodeReplicaLost {
				t.Fatalf("crashed request: %v, want a replica lost error", r.err)
			}
			if lost.Stage != 1 || lost.Replica != "b/1" {
				t.Errorf("lost stage %d replica %s, want stage 1 replica b/1", lost.Stage, lost.Replica)
			}
			if msg := r.err.Error(); !strings.Contains(msg, "stage 1 (b)") || !strings.Contains(msg, "b/1") {
				t.Errorf("error %q does not name stage 1 (b) and replica b/1", msg)
			}
			testkit.Eventually(t, "the crashed worker's exit", func() bool {
				select {
				case <-f.worker(1).Exited():
					return true
				default:
					return false
				}
			})
			if !strings.Contains(f.worker(1).ExitError().Error(), tc.state) {
				t.Errorf("exit: %v, want %s", f.worker(1).ExitError(), tc.state)
			}
			testkit.Eventually(t, "stage 1 to have one healthy replica", func() bool { return f.o.Stats().Stages[1].Healthy == 1 })

			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			h := <-heldDone
			if h.err != nil || len(h.chunks) != 2 || !strings.Contains(h.chunks[0], "held|a.0|b+gate:") {
				t.Fatalf("request on the other worker: %q, %v", h.text(), h.err)
			}

			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					if r := run(f.o, request(fmt.Sprint("after ", i), "")); r.err != nil || len(r.chunks) != 2 {
						t.Errorf("request after the crash: %q, %v", r.text(), r.err)
					}
				})
			}
			wg.Wait()
			select {
			case <-f.worker(0).Lost():
				t.Error("the surviving worker is lost")
			default:
			}
			if !strings.Contains(f.output.String(), "worker b/1 (pid ") || !strings.Contains(f.output.String(), "exited unexpectedly ("+tc.state+")") {
				t.Errorf("the workers' output lacks the prefixed exit line:\n%s", f.output)
			}
		})
	}
}

// TestCrashedWorkerRestarts crashes the only worker of a stage: the request
// it ran fails as replica lost, then a new worker process takes its place
// and the stage serves requests again.
func TestCrashedWorkerRestarts(t *testing.T) {
	cfg := writeConfig(t, strings.Replace(textConfig("process"), "replicas: 2", "replicas: 1", 1))
	f := start(t, cfg, registerTestEngines, func(o *orchestrator.Options) {
		o.RestartBackoff, o.RestartBackoffMax = 10*time.Millisecond, 100*time.Millisecond
	})
	crashed := f.worker(0)
	if r := run(f.o, request("before", "")); r.err != nil {
		t.Fatal(r.err)
	}
	r := run(f.o, request("doomed", "crash"))
	var lost *orchestrator.ReplicaLostError
	if !errors.As(r.err, &lost) || lost.Replica != "b/0" {
		t.Fatalf("crashed request: %v, want replica b/0 lost", r.err)
	}
	testkit.Eventually(t, "a new worker in service", func() bool {
		f.mu.Lock()
		n := len(f.workers)
		f.mu.Unlock()
		return n == 2 && f.o.Stats().Stages[1].Healthy == 1
	})
	fresh := f.worker(1)
	if fresh.Pid() == crashed.Pid() || processGone(fresh.Pid()) {
		t.Fatalf("new worker pid %d, crashed one %d", fresh.Pid(), crashed.Pid())
	}
	if err := crashed.ExitError(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("crashed worker: %v, want exit status 3", err)
	}
	for i := range 3 {
		r := run(f.o, request(fmt.Sprint("after ", i), ""))
		if r.err != nil || len(r.chunks) != 2 || !strings.Contains(r.chunks[0], "|b.0|") {
			t.Fatalf("request after the restart: %q, %v", r.text(), r.err)
		}
	}
	testkit.Eventually(t, "the crashed worker to be reaped", func() bool { return processGone(crashed.Pid()) })
}

// TestWorkerFloodsItsOutput runs a request whose worker writes 8 MiB to
// its stderr: the request succeeds, the log takes no more than the
// console's bound, and once the bucket has refilled the worker's next line
// comes through after a count of the bytes dropped.
func TestWorkerFloodsItsOutput(t *testing.T) {
	begun := time.Now() // the bucket starts full as the worker does
	cfg := writeConfig(t, strings.Replace(textConfig("process"), "replicas: 2", "replicas: 1", 1))
	f := start(t, cfg, registerTestEngines)
	if r := run(f.o, request("loud", "flood")); r.err != nil {
		t.Fatal(r.err)
	}
	// A quarter of the burst refills in a second: the next line goes.
	time.Sleep(1500 * time.Millisecond)
	if r := run(f.o, request("quiet", "say:after the flood")); r.err != nil {
		t.Fatalf("the next request: %v", r.err)
	}
	testkit.Eventually(t, "the worker's line after the flood", func() bool {
		return strings.Contains(f.output.String(), "after the flood")
	})
	out := f.output.String()
	if bound := subprocess.LogBurst + int(time.Since(begun).Seconds()*subprocess.LogRate) + 8<<10; len(out) > bound {
		t.Errorf("the log took %d bytes of an 8 MiB flood; want at most %d", len(out), bound)
	}
	if !regexp.MustCompile(`\d+ bytes of output dropped \(past the limit of 65536 bytes per second\)\n.*after the flood`).MatchString(out) {
		t.Errorf("the log does not count the bytes dropped before the next line: ...%s", out[max(0, len(out)-300):])
	}
}

// TestCancelReachesWorker cancels a request whose stage 1 runs in a
// worker: the worker's engine sees the cancellation, and the worker stays
// in service.
func TestCancelReachesWorker(t *testing.T) {
	f := start(t, writeConfig(t, textConfig("process")), registerTestEngines)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := f.o.Submit(ctx, request("wait", "block"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the worker to start the call", func() bool { return strings.Contains(f.output.String(), "block: started") })
	cancel()
	testkit.Eventually(t, "the worker to see the cancellation", func() bool { return strings.Contains(f.output.String(), "block: cancelled") })
	if err := s.Err(); orchestrator.CodeOf(err) != orchestrator.CodeAborted {
		t.Errorf("cancelled request: %v, want aborted", err)
	}
	s.Close()
	if st := f.o.Stats(); st.Stages[1].Healthy != 2 || st.Bindings() != 0 {
		t.Errorf("after the cancellation: %+v", st)
	}
	for i := range 2 {
		if r := run(f.o, request("again", "")); r.err != nil {
			t.Errorf("request %d after the cancellation: %v", i, r.err)
		}
	}
}

// TestShutdownLeavesNoProcess stops an orchestrator with workers: they
// exit cleanly and are reaped.
func TestShutdownLeavesNoProcess(t *testing.T) {
	cfg := writeConfig(t, textConfig("process"))
	f := start(t, cfg, registerTestEngines)
	if r := run(f.o, request("hello", "")); r.err != nil {
		t.Fatal(r.err)
	}
	pids := []int{f.worker(0).Pid(), f.worker(1).Pid()}
	for _, pid := range pids {
		if processGone(pid) {
			t.Fatalf("worker %d is gone before the shutdown", pid)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i, pid := range pids {
		if !processGone(pid) {
			t.Errorf("worker %d (pid %d) still runs after the shutdown", i, pid)
		}
		if err := f.worker(i).ExitError(); err != nil {
			t.Errorf("worker %d: %v, want a clean exit", i, err)
		}
	}
}

// TestCloseKillsStuckWorker closes a worker that does not stop when asked:
// it is killed after the stop timeout.
func TestCloseKillsStuckWorker(t *testing.T) {
	t.Setenv(hangEnv, "1")
	cfg := writeConfig(t, textConfig("process"))
	_, spec := cfg.StageSpec(1, 0)
	e, err := process.New(process.Config{Stage: spec, Pipeline: cfg, Stderr: io.Discard, Worker: pipeline.Worker{StopTimeout: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = e.Close()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Close: %v, want an error saying the worker was killed", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s", took)
	}
	if !processGone(e.Pid()) {
		t.Errorf("worker %d still runs", e.Pid())
	}
}

// TestOutputBeforeTheAnnouncement starts a worker that prints a line on its
// stdout before its address: the line goes to the output, prefixed, then
// the address it listens on.
func TestOutputBeforeTheAnnouncement(t *testing.T) {
	t.Setenv(chattyEnv, "1")
	cfg := writeConfig(t, textConfig("process"))
	_, spec := cfg.StageSpec(1, 0)
	var out testkit.SyncBuffer
	e, err := process.New(process.Config{Stage: spec, Pipeline: cfg, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("worker b/0 (pid %d): ", e.Pid())
	if want := prefix + "chatter before the announcement\n" + prefix + "listening on " + strings.TrimPrefix(e.Endpoint(), "http://") + "\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

// TestNoWorkerOutlivesItsParent kills a parent process with SIGKILL: its
// worker sees its stdin close and exits.
func TestNoWorkerOutlivesItsParent(t *testing.T) {
	cfg := writeConfig(t, textConfig("process"))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), parentEnv+"="+cfg.Source)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("parent: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	testkit.Eventually(t, fmt.Sprintf("worker %d to exit after its parent died", pid), func() bool { return processGone(pid) })
}

// TestStartFailures checks the errors of workers that cannot start.
func TestStartFailures(t *testing.T) {
	newWorker := func(cfg *pipeline.Config, exe string) error {
		_, spec := cfg.StageSpec(1, 0)
		e, err := process.New(process.Config{Stage: spec, Pipeline: cfg, Executable: exe, Stderr: io.Discard})
		if err == nil {
			_ = e.Close()
		}
		return err
	}
	t.Run("config gone", func(t *testing.T) {
		cfg := writeConfig(t, textConfig("process"))
		if err := os.Remove(cfg.Source); err != nil {
			t.Fatal(err)
		}
		err := newWorker(cfg, "")
		if err == nil || !strings.Contains(err.Error(), "exited while starting (exit status 2)") || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("got %v, want the worker's exit and its message", err)
		}
	})
	t.Run("config changed", func(t *testing.T) {
		cfg := writeConfig(t, textConfig("process"))
		if err := os.WriteFile(cfg.Source, []byte(strings.Replace(textConfig("process"), "name: text", "name: other", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := newWorker(cfg, ""); err == nil || !strings.Contains(err.Error(), "has the file changed") {
			t.Errorf("got %v, want a changed pipeline", err)
		}
	})
	t.Run("no executable", func(t *testing.T) {
		cfg := writeConfig(t, textConfig("process"))
		err := newWorker(cfg, filepath.Join(t.TempDir(), "missing"))
		if err == nil || !strings.Contains(err.Error(), "start") {
			t.Errorf("got %v, want a start error", err)
		}
	})
	t.Run("not a worker", func(t *testing.T) {
		cfg := writeConfig(t, textConfig("process"))
		err := newWorker(cfg, "/bin/true")
		if err == nil || !strings.Contains(err.Error(), "exited while starting (exit status 0)") {
			t.Errorf("got %v, want an exit while starting", err)
		}
	})
	t.Run("unloadable pipeline", func(t *testing.T) {
		cfg, err := pipeline.Parse([]byte(textConfig("process")), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := newWorker(cfg, ""); err == nil || !strings.Contains(err.Error(), "cannot load it") {
			t.Errorf("got %v, want a refusal to start", err)
		}
	})
}

// TestSkippedStageInWorker places a stage the route skips in workers: they
// start, warm and stop, and requests never reach them.
func TestSkippedStageInWorker(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf(textPipeline, "\n  stage_transitions: [[0, 2]]", "process"))
	f := start(t, cfg, registerTestEngines)
	r := run(f.o, request("skip", ""))
	if r.err != nil || len(r.chunks) != 2 || strings.Contains(r.text(), "|b") {
		t.Fatalf("got %q, %v", r.text(), r.err)
	}
	if st := f.o.Stats(); st.Stages[1].Healthy != 2 {
		t.Errorf("skipped stage: %+v", st.Stages[1])
	}
}

// TestWorkerRefusesOthers checks that a worker, though it listens on a
// loopback port, answers only its parent: a call without the parent's
// bearer token is refused before anything runs.
func TestWorkerRefusesOthers(t *testing.T) {
	f := start(t, writeConfig(t, textConfig("process")), registerTestEngines)
	body := strings.NewReader(`{"stage_id": 1, "stage_input": {"text": "x"}}`)
	resp, err := http.Post(f.worker(1).Endpoint()+"/v1/run", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unauthenticated call to a worker: status %d, want 401", resp.StatusCode)
	}
	if r := run(f.o, request("still works", "")); r.err != nil {
		t.Errorf("parent's request: %v", r.err)
	}
}

// TestWorkerFlags starts a worker with flags of its parent's: they end its
// command line, and serve parses them (an unknown one stops the worker
// before it announces).
func TestWorkerFlags(t *testing.T) {
	cfg := writeConfig(t, textConfig("process"))
	_, spec := cfg.StageSpec(1, 0)
	e, err := process.New(process.Config{Stage: spec, Pipeline: cfg, Flags: []string{"--turns=false"}, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", e.Pid()))
	if err := errors.Join(err, e.Close()); err != nil {
		t.Fatal(err)
	}
	if args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"); args[len(args)-1] != "--turns=false" {
		t.Errorf("worker's command line %q does not end in --turns=false", args)
	}
	var out testkit.SyncBuffer
	if e, err := process.New(process.Config{Stage: spec, Pipeline: cfg, Flags: []string{"--no-such-flag"}, Stderr: &out}); err == nil {
		_ = e.Close()
		t.Fatal("a worker with an unknown flag started")
	}
	if !strings.Contains(out.String(), "no-such-flag") {
		t.Errorf("the worker's output %q does not name the unknown flag", out.String())
	}
}
