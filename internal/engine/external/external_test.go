package external

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testkit"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(testStageEnv); mode != "" {
		os.Exit(runTestStage(mode))
	}
	goleak.VerifyTestMain(m)
}

// start builds and warms a replica whose program is this test binary in
// mode, and closes it when t ends.
func start(t *testing.T, mode string, tweak ...func(*engine.Spec, *Config)) (*Engine, *testkit.SyncBuffer) {
	t.Helper()
	e, stderr, err := build(t, mode, tweak...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, stderr
}

func build(t *testing.T, mode string, tweak ...func(*engine.Spec, *Config)) (*Engine, *testkit.SyncBuffer, error) {
	t.Helper()
	stderr := &testkit.SyncBuffer{}
	spec := engine.Spec{StageID: 2, Name: "gain", Input: engine.KindAudio, Output: engine.KindAudio,
		Options: engine.Options{"command": []any{os.Args[0], "-test.run=^$"}, "env": map[string]any{testStageEnv: mode}}}
	cfg := Config{Stderr: stderr, CancelTimeout: 500 * time.Millisecond}
	for _, f := range tweak {
		f(&spec, &cfg)
	}
	e, err := New(spec, cfg)
	if err != nil {
		return nil, stderr, err
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, stderr, nil
}

func audio(rate int, samples ...int16) engine.Chunk {
	return engine.Chunk{Audio: &engine.Audio{SampleRate: rate, Samples: samples}}
}

func run(ctx context.Context, e *Engine, params string, in ...engine.Chunk) ([]engine.Chunk, error) {
	sink := &engine.SliceSink{}
	job := &engine.Job{RequestID: "r1", StageID: 2, In: engine.NewSliceSource(in...), Out: sink}
	if params != "" {
		job.Params = []byte(params)
	}
	err := e.Process(ctx, job)
	return sink.Chunks, err
}

func TestEchoWithGain(t *testing.T) {
	e, stderr := start(t, "echo")
	out, err := run(context.Background(), e, `{"gain": 2}`, audio(16000, 1, 2, 3), audio(16000, -4), engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, EndOfSentence: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].Audio.Samples[2] != 6 || out[1].Audio.Samples[0] != -8 || !out[2].Audio.EndOfSentence {
		t.Fatalf("output %+v", out)
	}
	if !strings.Contains(stderr.String(), "stage gain/0 (pid ") || !strings.Contains(stderr.String(), "test stage echo starting") {
		t.Errorf("stderr %q: want the program's lines, prefixed with the replica", stderr)
	}
	if v := e.Voices(); len(v) != 1 || v[0].ID != "v1" {
		t.Errorf("voices %+v", v)
	}
	// Jobs run at once, and many one after another.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			in := make([]engine.Chunk, 30)
			for k := range in {
				in[k] = audio(16000, int16(i), int16(k))
			}
			out, err := run(context.Background(), e, "", in...)
			if err != nil || len(out) != 30 || out[29].Audio.Samples[1] != 29 || out[0].Audio.Samples[0] != int16(i) {
				t.Errorf("job %d: %d chunks, %v", i, len(out), err)
			}
		})
	}
	wg.Wait()
}

func TestParams(t *testing.T) {
	e, _ := start(t, "echo")
	for _, tc := range []struct{ params, field, reason string }{
		{`{"gain": 9}`, "gain", "must be between 0 and 4"},
		{`{"volume": 1}`, "volume", "unknown field; this stage takes only gain"},
		{`[1]`, "", "want an object of params"},
	} {
		err := e.CheckParams([]byte(tc.params))
		var pe *engine.ParamError
		if !errors.As(err, &pe) || pe.Field != tc.field || pe.Reason != tc.reason {
			t.Errorf("%s: %v; want field %q, reason %q", tc.params, err, tc.field, tc.reason)
		}
	}
	if err := e.CheckParams([]byte(`{"gain": 3}`)); err != nil {
		t.Errorf("good params: %v", err)
	}
	// A job given bad params fails with them, naming the field.
	_, err := run(context.Background(), e, `{"gain": -1}`, audio(16000, 1))
	var pe *engine.ParamError
	if !errors.As(err, &pe) || pe.Field != "gain" {
		t.Errorf("job with bad params: %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		tweak      func(*engine.Spec, *Config)
	}{
		{"text", `the program takes "text" and makes "audio", but stage 2 (gain) takes audio and makes audio`, nil},
		{"refuse", "the program failed: no model here", nil},
		{"silent", "not said hello within 300ms (warm_timeout)", func(s *engine.Spec, _ *Config) { s.WarmTimeout = 300 * time.Millisecond }},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			var tweaks []func(*engine.Spec, *Config)
			if tc.tweak != nil {
				tweaks = append(tweaks, tc.tweak)
			}
			e, _, err := build(t, tc.mode, tweaks...)
			if err != nil {
				t.Fatal(err)
			}
			err = e.Warm(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), os.Args[0]) {
				t.Fatalf("Warm: %v; want an error naming the command and %q", err, tc.want)
			}
		})
	}
	if _, _, err := build(t, "echo", func(s *engine.Spec, _ *Config) { s.Options = engine.Options{"command": "python3 stage.py"} }); err == nil || !strings.Contains(err.Error(), "never a shell string") {
		t.Errorf("a shell string: %v", err)
	}
	if _, _, err := build(t, "echo", func(s *engine.Spec, _ *Config) { s.Options = engine.Options{"command": []any{"/nonexistent/stage"}} }); err == nil || !strings.Contains(err.Error(), "/nonexistent/stage") {
		t.Errorf("a missing program: %v", err)
	}
}

// lostWith checks that err is a lost replica's, naming the replica and
// the kind of loss, and that the replica is lost; that the error keeps
// the program's command, pid and whatever else detail says for the
// server's log, where the loss's detail went.
func lostWith(t *testing.T, e *Engine, err error, kind string, detail ...string) {
	t.Helper()
	if !errors.Is(err, engine.ErrReplicaLost) {
		t.Fatalf("error %v; want a lost replica", err)
	}
	if msg := err.Error(); !strings.Contains(msg, kind) || !strings.Contains(msg, "replica "+e.id) {
		t.Errorf("error %q; want it to name replica %s and say %q", msg, e.id, kind)
	}
	select {
	case <-e.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the replica is not lost")
	}
	if e.opts.DetailedErrors {
		return
	}
	msg := err.Error()
	for _, private := range append([]string{e.opts.Command[0], "(pid "}, detail...) {
		if strings.Contains(msg, private) {
			t.Errorf("error %q; it tells the client %q", msg, private)
		}
	}
	log := e.cfg.Stderr.(fmt.Stringer).String()
	for _, w := range append([]string{e.opts.Command[0], "(pid ", kind}, detail...) {
		if !strings.Contains(e.lostDetail().Error(), w) || !strings.Contains(log, w) {
			t.Errorf("the loss's detail %q (in the log: %v); want it to say %q", e.lostDetail(), strings.Contains(log, w), w)
		}
	}
}

func TestCrashMidJob(t *testing.T) {
	e, _ := start(t, "crash")
	_, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2), audio(16000, 3))
	lostWith(t, e, err, "exit status 3", "about to crash")
	// The jobs that come after, and those running at the crash, fail with
	// the loss too: none panics, none ends as done.
	if _, err := run(context.Background(), e, "", audio(16000, 1)); !errors.Is(err, engine.ErrReplicaLost) {
		t.Errorf("a job after the loss: %v", err)
	}
	e2, _ := start(t, "crash")
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := run(ctx, e2, "", audio(16000, 1), audio(16000, 2))
			if err == nil {
				t.Error("a job of a program that crashed ended as done")
			}
		})
	}
	wg.Wait()
}

func TestGarbageLosesTheReplica(t *testing.T) {
	e, _ := start(t, "garbage")
	select {
	case <-e.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("not lost")
	}
	lostWith(t, e, e.LostErr(), "the program wrote a malformed message", "is not a JSON object", "this is not a header")
}

func TestFailedJob(t *testing.T) {
	e, _ := start(t, "fail")
	_, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2))
	if err == nil || err.Error() != "the model ran out of road" || errors.Is(err, engine.ErrReplicaLost) {
		t.Fatalf("error %v; want the program's message", err)
	}
	// The program keeps serving.
	if out, err := run(context.Background(), e, "", audio(16000, 5)); err != nil || len(out) != 1 {
		t.Fatalf("next job: %v, %v", out, err)
	}
	e2, _ := start(t, "badinput")
	_, err = run(context.Background(), e2, "", audio(22050, 1))
	var ie *engine.InputError
	if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "want 16000 Hz") {
		t.Fatalf("bad input: %v", err)
	}
}

func TestCancel(t *testing.T) {
	e, _ := start(t, "stall")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := run(ctx, e, "", audio(16000, 1), audio(16000, 2), audio(16000, 3))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
	if err := e.Loss.Err(); err != nil {
		t.Fatalf("a cancelled job lost the replica: %v", err)
	}
	e.mu.Lock()
	left := len(e.jobs)
	e.mu.Unlock()
	if left != 0 {
		t.Errorf("%d jobs left after the cancel's answer", left)
	}
	// A program that does not answer a cancel loses its replica.
	deaf, _ := start(t, "deaf")
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, _ = run(ctx, deaf, "", audio(16000, 1), audio(16000, 2))
	select {
	case <-deaf.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("a program that ignores cancel kept its replica")
	}
	lostWith(t, deaf, deaf.LostErr(), "the program did not answer a cancel", "job 1, within 500ms")
}

func TestTimeout(t *testing.T) {
	e, _ := start(t, "stall", func(s *engine.Spec, _ *Config) { s.Timeout = 200 * time.Millisecond })
	_, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2))
	if err == nil || !strings.Contains(err.Error(), "made nothing for") || !strings.Contains(err.Error(), "(timeout 200ms)") {
		t.Fatalf("stalled job: %v", err)
	}
	if err := e.Loss.Err(); err != nil {
		t.Fatalf("a stalled job lost the replica: %v", err)
	}
}

func TestCloseStopsTheProgram(t *testing.T) {
	e, _ := start(t, "echo")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.child.Exited():
	default:
		t.Fatal("the program still runs after Close")
	}
	if _, err := run(context.Background(), e, "", audio(16000, 1)); !errors.Is(err, engine.ErrReplicaLost) {
		t.Errorf("after Close: %v", err)
	}
}
