package external

// The test binary is also the stage program of the tests: with
// testStageEnv set, TestMain serves a test stage over standard input and
// output, the way it behaves given by the variable's value.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
	"github.com/omnistage/omnistage/internal/testkit/stageprog"
)

const testStageEnv = "OMNISTAGE_TEST_STAGE"

// runTestStage serves the test stage mode and returns the exit status.
func runTestStage(mode string) int {
	hello := stageproto.Hello{Name: "test-" + mode, Input: "audio", Output: "audio", MaxJobs: 2,
		Params: map[string]stageproto.ParamInfo{"gain": {Type: "number"}},
		Voices: []engine.Voice{{ID: "v1", Name: "Voice One", Language: "en-US"}}}
	switch mode {
	case "silent":
		time.Sleep(time.Hour)
		return 0
	case "bytes":
		// No protocol: what comes in goes out (BenchmarkChunk's floor).
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			return 1
		}
		return 0
	case "text":
		hello.Input = "text"
	case "badtensor":
		hello.Input, hello.Output = "tensor", "tensor"
	case "batch", "batchstall":
		hello.MaxBatch = 4
	case "refuse":
		// Says hello, then refuses to warm.
	case "helper":
		// A helper that holds standard output and outlives the program
		// unless it is killed (sh's &, Python's multiprocessing).
		helper := exec.Command("sleep", "60")
		helper.Stdout = os.Stdout
		if err := helper.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "test stage:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "helper pid %d\n", helper.Process.Pid)
	case "garbage":
		go func() {
			time.Sleep(50 * time.Millisecond)
			fmt.Fprintln(os.Stdout, "this is not a header")
		}()
	}
	if k, ok := strings.CutPrefix(mode, "kind:"); ok {
		hello.Input, hello.Output = k, k
	}
	fmt.Fprintln(os.Stderr, "test stage", mode, "starting")
	err := stageprog.Serve(context.Background(), stageprog.Stdin(), stageprog.Stdout(), hello, &testStage{mode: mode})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test stage:", err)
		return 1
	}
	return 0
}

// testStage is the engine the test program serves.
type testStage struct {
	mode string
}

func (s *testStage) Warm(context.Context) error {
	if s.mode == "refuse" {
		return errors.New("no model here")
	}
	return nil
}

func (s *testStage) Close() error { return nil }

func (s *testStage) CheckParams(params json.RawMessage) error {
	var p struct {
		Gain *float64 `json:"gain"`
	}
	if err := engine.DecodeParams(params, &p); err != nil {
		return err
	}
	if p.Gain != nil && (*p.Gain < 0 || *p.Gain > 4) {
		return &engine.ParamError{Field: "gain", Reason: "must be between 0 and 4"}
	}
	return nil
}

// Process echoes its input, scaled by the gain param; the mode changes
// that: crash exits after the first chunk, stall stops sending, deaf
// ignores cancellation, flood sends past its credit, fail fails.
func (s *testStage) Process(ctx context.Context, job *engine.Job) error {
	if err := s.CheckParams(job.Params); err != nil {
		return err
	}
	gain := 1.0
	var p struct {
		Gain *float64 `json:"gain"`
	}
	_ = engine.DecodeParams(job.Params, &p)
	if p.Gain != nil {
		gain = *p.Gain
	}
	// deaf takes its input whatever the cancel: a Recv that saw the
	// cancel first would end the job and answer it.
	recvCtx := ctx
	if s.mode == "deaf" {
		recvCtx = context.WithoutCancel(ctx)
	}
	for n := 0; ; n++ {
		c, err := job.In.Recv(recvCtx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.mode == "badtensor" {
			// Output of job 1 whose data is half its shape's, written
			// by hand: stageprog's writer refuses to.
			fmt.Fprint(os.Stdout, `{"type":"output","job":1,"kind":"tensor","tensors":[{"name":"x","dtype":"float32","shape":[2]}],"data_length":4}`+"\n\x00\x00\x80\x3f")
			<-ctx.Done()
			return ctx.Err()
		}
		if s.mode == "kind:regions" {
			fmt.Fprintf(os.Stderr, "regions chunk of %d regions\n", len(c.Regions.Regions))
		}
		switch {
		case s.mode == "crash" && n == 1:
			fmt.Fprintln(os.Stderr, "about to crash")
			os.Exit(3)
		case s.mode == "stall" && n == 1:
			<-ctx.Done()
			return ctx.Err()
		case s.mode == "deaf" && n == 1:
			<-ctx.Done()
			time.Sleep(time.Hour)
		case s.mode == "fail" && n == 1:
			return errors.New("the model ran out of road")
		case s.mode == "badinput" && c.Audio != nil && c.Audio.SampleRate != 16000:
			return &engine.InputError{Reason: fmt.Sprintf("want 16000 Hz, got %d", c.Audio.SampleRate)}
		}
		if err := job.Out.Send(ctx, echo(c, gain)); err != nil {
			return err
		}
		if s.mode == "slow" {
			time.Sleep(20 * time.Millisecond)
		}
		if s.mode == "noisy" {
			fmt.Fprintln(os.Stderr, strings.Repeat("n", 10))
		}
		if s.mode == "stderrflood" {
			// 4 MB of standard error a chunk, then the chunk's number.
			line := strings.Repeat("f", 99) + "\n"
			_, _ = os.Stderr.WriteString(strings.Repeat(line, 40_000))
			fmt.Fprintf(os.Stderr, "chunk %d flooded\n", n)
		}
	}
}

// echo is the output of chunk c: audio scaled by gain (at gain 1, the
// chunk as it came), for text a sample of its length, else c.
func echo(c engine.Chunk, gain float64) engine.Chunk {
	out := c
	if c.Audio != nil && gain != 1 {
		a := *c.Audio
		a.Samples = make([]int16, len(c.Audio.Samples))
		for i, v := range c.Audio.Samples {
			a.Samples[i] = int16(float64(v) * gain)
		}
		out.Audio = &a
	}
	if c.Text != nil {
		out = engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, Samples: []int16{int16(len(c.Text.Text))}}}
	}
	return out
}

// RunBatch echoes each item's chunk, scaled by its job's gain, and says
// on standard error how many items the batch held; an item of audio not
// at 16 kHz or with a gain out of range fails alone. In mode batchstall,
// it makes nothing until the runtime cancels every job.
func (s *testStage) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	fmt.Fprintf(os.Stderr, "batch of %d\n", len(items))
	for _, it := range items {
		u := it.Input.(*stageprog.BatchUnit)
		if s.mode == "batchstall" {
			<-u.Ctx.Done()
			it.Err = u.Ctx.Err()
			continue
		}
		var p struct {
			Gain *float64 `json:"gain"`
		}
		if err := s.CheckParams(u.Job.Params); err != nil {
			it.Err = err
			continue
		}
		gain := 1.0
		if _ = engine.DecodeParams(u.Job.Params, &p); p.Gain != nil {
			gain = *p.Gain
		}
		if a := u.Chunk.Audio; a != nil && a.SampleRate != 16000 {
			it.Err = &engine.InputError{Reason: fmt.Sprintf("want 16000 Hz, got %d", a.SampleRate)}
			continue
		}
		it.Output = []engine.Chunk{echo(u.Chunk, gain)}
	}
	return nil
}
