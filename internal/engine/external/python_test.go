package external

// The Python SDK (sdk/python) through the real engine: its test stages
// run as the replicas' programs, and its own unit tests run from here, so
// that `go test` runs them in CI.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testkit"
)

// pythonSDK returns the absolute path of sdk/python; it skips tb when
// python3 is not installed.
func pythonSDK(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		tb.Skip("python3 is not installed: the Python SDK's tests need it")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "sdk", "python"))
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// pythonOptions returns the options of a stage whose program is the SDK's
// test stage script, given args.
func pythonOptions(tb testing.TB, script string, args ...string) engine.Options {
	tb.Helper()
	sdk := pythonSDK(tb)
	command := []any{"python3", filepath.Join(sdk, "tests", script)}
	for _, a := range args {
		command = append(command, a)
	}
	return engine.Options{"command": command, "env": map[string]any{"PYTHONPATH": sdk}}
}

// python is a tweak of start and build: the replica's program is the
// SDK's test stage script, given args.
func python(t *testing.T, script string, args ...string) func(*engine.Spec, *Config) {
	opts := pythonOptions(t, script, args...)
	return func(s *engine.Spec, _ *Config) { s.Options = opts }
}

func TestPythonGain(t *testing.T) {
	e, _ := start(t, "", python(t, "gain.py"))
	out, err := run(context.Background(), e, `{"gain": 2}`, audio(16000, 1, 2, 3), audio(16000, -4, 30000),
		engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, EndOfSentence: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Chunk{audio(16000, 2, 4, 6), audio(16000, -8, 32767), {Audio: &engine.Audio{SampleRate: 16000, Samples: []int16{}, EndOfSentence: true}}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("output %+v; want %+v", out, want)
	}
	for _, tc := range []struct{ params, field, reason string }{
		{`{"gain": 9}`, "gain", "must be between 0 and 4"},
		{`{"gain": true}`, "gain", "must be between 0 and 4"},
		{`{"volume": 1}`, "volume", "unknown field; this stage takes only gain"},
	} {
		var pe *engine.ParamError
		if err := e.CheckParams([]byte(tc.params)); !errors.As(err, &pe) || pe.Field != tc.field || pe.Reason != tc.reason {
			t.Errorf("%s: %v; want field %q, reason %q", tc.params, err, tc.field, tc.reason)
		}
	}
	if err := e.CheckParams([]byte(`{"gain": 3.5}`)); err != nil {
		t.Errorf("good params: %v", err)
	}
	// A job given bad params fails with them, naming the field.
	var pe *engine.ParamError
	if _, err := run(context.Background(), e, `{"gain": -1}`, audio(16000, 1)); !errors.As(err, &pe) || pe.Field != "gain" {
		t.Errorf("job with bad params: %v", err)
	}
	// Jobs run at once (4 in the program), and many one after another.
	var wg sync.WaitGroup
	for i := range 12 {
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

// blockingSource yields its chunks, then blocks until ctx ends.
type blockingSource struct{ chunks []engine.Chunk }

func (s *blockingSource) Recv(ctx context.Context) (engine.Chunk, error) {
	if len(s.chunks) > 0 {
		c := s.chunks[0]
		s.chunks = s.chunks[1:]
		return c, nil
	}
	<-ctx.Done()
	return engine.Chunk{}, ctx.Err()
}

// cancelSink cancels the job once it has its first chunk.
type cancelSink struct {
	cancel context.CancelFunc
	n      int
}

func (s *cancelSink) Send(ctx context.Context, c engine.Chunk) error {
	if s.n++; s.n == 1 {
		s.cancel()
	}
	return nil
}

func TestPythonCancel(t *testing.T) {
	e, stderr := start(t, "", python(t, "behave.py", "stall"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := &engine.Job{RequestID: "r1", StageID: 2, In: &blockingSource{chunks: []engine.Chunk{audio(16000, 1)}}, Out: &cancelSink{cancel: cancel}}
	if err := e.Process(ctx, job); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
	if err := e.Loss.Err(); err != nil {
		t.Fatalf("a cancelled job lost the replica: %v", err)
	}
	// In the program, the job's input ended and send raised Cancelled.
	testkit.Eventually(t, "the stage's line about the cancel", func() bool {
		return strings.Contains(stderr.String(), "stalled job 1: input ended, cancelled True, send raised Cancelled")
	})
	// The program keeps serving.
	if out, err := run(context.Background(), e, "", audio(16000, 5)); err != nil || len(out) != 2 {
		t.Fatalf("next job: %v, %v", out, err)
	}
}

func TestPythonFailures(t *testing.T) {
	e, stderr := start(t, "", python(t, "behave.py", "fail"))
	_, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2))
	if err == nil || err.Error() != "the model ran out of road" || errors.Is(err, engine.ErrReplicaLost) {
		t.Fatalf("error %v; want the program's message", err)
	}
	testkit.Eventually(t, "the traceback on stderr", func() bool {
		return strings.Contains(stderr.String(), "RuntimeError: the model ran out of road")
	})
	if out, err := run(context.Background(), e, "", audio(16000, 5)); err != nil || len(out) != 1 {
		t.Fatalf("next job: %v, %v", out, err)
	}

	e2, _ := start(t, "", python(t, "behave.py", "badinput"))
	_, err = run(context.Background(), e2, "", audio(22050, 1))
	var ie *engine.InputError
	if !errors.As(err, &ie) || ie.Reason != "want 16000 Hz, got 22050" {
		t.Fatalf("bad input: %v", err)
	}

	crash, _ := start(t, "", python(t, "behave.py", "crash"))
	_, err = run(context.Background(), crash, "", audio(16000, 1), audio(16000, 2), audio(16000, 3))
	lostWith(t, crash, err, "exit status 3", "about to crash")

	refuse, _, err := build(t, "", python(t, "behave.py", "refuse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := refuse.Warm(context.Background()); err == nil || !strings.Contains(err.Error(), "the program failed: no model here") {
		t.Fatalf("Warm: %v; want the program's refusal", err)
	}
}

// TestPythonPrint checks that what the stage prints, on sys.stdout or file
// descriptor 1, goes to its standard error and leaves the protocol alone.
func TestPythonPrint(t *testing.T) {
	e, stderr := start(t, "", python(t, "behave.py", "noisy"))
	if out, err := run(context.Background(), e, "", audio(16000, 1), audio(16000, 2)); err != nil || len(out) != 2 {
		t.Fatalf("job: %v, %v", out, err)
	}
	testkit.Eventually(t, "the prints on stderr", func() bool {
		s := stderr.String()
		return strings.Contains(s, "warming, on stdout") && strings.Contains(s, "chunk 1 on stdout") && strings.Contains(s, "chunk on descriptor 1")
	})
}

// TestPythonKinds sends a chunk of each kind through a Python echo stage:
// the SDK's encodings are the runtime's.
func TestPythonKinds(t *testing.T) {
	for _, c := range []engine.Chunk{
		{Text: &engine.Text{Text: "Grüße, world."}},
		{Words: &engine.Words{Words: []engine.Word{{Word: "Hi", CharStart: 0, CharEnd: 2, StartMs: 10, EndMs: 300, Spoken: []string{"hi"}}}}},
		{Frames: &engine.Frames{Voice: "slt", Channels: 2, StrChannels: 1, FrameShift: 0.005, Params: []float32{1, 2, 3, 4}, Str: []float32{0.5, 0.25}}},
		{Segments: &engine.Segments{Voice: "kal", Names: []string{"pau", "h"}, Ends: []float32{0.1, 0.2}, Cluster: []bool{false, true}, TargetPos: []float32{0.05}, TargetF0: []float32{110}}},
		{Data: &engine.Data{Kind: "phonemes", Bytes: []byte("h@loU"), Meta: map[string]string{"alphabet": "x-sampa"}}},
		{Tensors: &engine.Tensors{Tensors: []engine.Tensor{engine.Float32Tensor("x", []int64{1, 2}, []float32{0.5, -1}),
			{Name: "mask", Type: engine.Bool, Shape: []int64{}, Data: []byte{1}}}}},
		{Image: &engine.Image{Format: "jpeg", Width: 3, Height: 2, Bytes: []byte("\xff\xd8...")}},
		{Regions: &engine.Regions{Width: 40, Height: 20, Regions: []engine.Region{
			{Index: 0, Box: [4]engine.Point{{X: 1, Y: 2}, {X: 30, Y: 2.5}, {X: 30, Y: 12}, {X: 1, Y: 11.5}}, Score: 0.9, Crop: &engine.Crop{Width: 2, Height: 1, Pixels: []byte{1, 2, 3, 4, 5, 6}}},
			{Index: 1, Box: [4]engine.Point{{X: 1, Y: 2}, {X: 30, Y: 2.5}, {X: 30, Y: 12}, {X: 1, Y: 11.5}}, Score: 0.7, Rotated: true, Text: "Hé", Confidence: []float32{0.99, 0.5}}}}},
	} {
		t.Run(string(c.Kind()), func(t *testing.T) {
			opts := pythonOptions(t, "echo.py", string(c.Kind()))
			e, _ := start(t, "", func(s *engine.Spec, _ *Config) { s.Input, s.Output, s.Options = c.Kind(), c.Kind(), opts })
			out, err := run(context.Background(), e, "", c)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || !reflect.DeepEqual(out[0], c) {
				t.Fatalf("output %+v; want %+v", out, c)
			}
		})
	}
}

// TestPythonBatches runs requests at a Python stage that takes batches
// (process_batch): one batch of the runtime's reaches it as batch
// messages of up to its max_batch, and each request gets its own output
// or error.
func TestPythonBatches(t *testing.T) {
	e, stderr := start(t, "", python(t, "batcher.py"))
	g := newGather(e, 5)
	ctx := engine.WithBatches(context.Background(), g)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			rate := 16000
			if i == 3 {
				rate = 8000
			}
			out, err := run(ctx, e, fmt.Sprintf(`{"gain": %d}`, i), audio(rate, 100))
			switch {
			case i == 3:
				var ie *engine.InputError
				if !errors.As(err, &ie) || ie.Reason != "want 16000 Hz, got 8000" {
					t.Errorf("request %d: %v; want its own input error", i, err)
				}
			case err != nil:
				t.Errorf("request %d: %v", i, err)
			case !reflect.DeepEqual(out, []engine.Chunk{audio(16000, int16(100*i))}):
				t.Errorf("request %d: %+v", i, out)
			}
		})
	}
	wg.Wait()
	testkit.Eventually(t, "the program's batches of 4 and 1", func() bool {
		s := stderr.String()
		return strings.Contains(s, "batch of 4") && strings.Contains(s, "batch of 1")
	})
}

// TestPythonUnitTests runs the SDK's own tests (sdk/python/tests).
func TestPythonUnitTests(t *testing.T) {
	sdk := pythonSDK(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-m", "unittest", "discover", "-s", filepath.Join(sdk, "tests"))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest discover: %v\n%s", err, out)
	}
}

// TestPythonMissingModule checks that a program that dies on an import
// says why it may have: its environment is clean, and the stage's env is
// where its variables go.
func TestPythonMissingModule(t *testing.T) {
	pythonSDK(t)
	e, _, err := build(t, "", func(s *engine.Spec, _ *Config) {
		s.Options = engine.Options{"command": []any{"python3", "-c", "import omnistage_no_such_module"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Warm(context.Background())
	for _, want := range []string{"No module named 'omnistage_no_such_module'", "the program's environment is clean (PATH and options.env of the stage's deploy entry only",
		"a virtualenv's bin/python", "(PYTHONPATH) with options.env"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Warm: %v; want it to say %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "environment is clean"); n != 1 {
		t.Errorf("the hint comes %d times: %v", n, err)
	}
}
