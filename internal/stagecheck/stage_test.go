package stagecheck

// The test binary is also the stage program the tests check: with
// testStageEnv set, TestMain serves a test stage over standard input and
// output, the way it misbehaves given by the variable's value.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
	"github.com/omnistage/omnistage/internal/testkit/stageprog"
)

const testStageEnv = "OMNISTAGE_STAGECHECK_TEST_STAGE"

// runTestStage serves the test stage of mode and returns its exit status.
// The modes: echo (echoes audio scaled by its gain param: passes every
// case), lax (takes chunks of any kind), serial (one job at a time), text
// (takes text, makes audio), anyparams (takes any params), crash (exits
// on a job's second chunk), stall (stops at a job's second chunk until
// cancelled), deaf (stops there and ignores cancel), fail (fails a job
// there), silent (no hello), refuse (refuses to warm up), badexit (exits
// with status 1 when asked to stop), badhello (a hello of protocol 2, and
// a voice with no name), batch (takes batches of up to 3 jobs, each
// echoed as echo does), batchlax (batches, taking chunks of any kind),
// batchmix (batches, each job's output another's).
func runTestStage(mode string) int {
	hello := stageproto.Hello{Name: "test-" + mode, Input: "audio", Output: "audio", MaxJobs: 2,
		Params: map[string]stageproto.ParamInfo{"gain": {Type: "number"}},
		Voices: []engine.Voice{{ID: "v1", Name: "Voice One", Language: "en-US"}}}
	switch mode {
	case "silent":
		time.Sleep(time.Hour)
		return 0
	case "badhello":
		fmt.Println(`{"type":"hello","protocol":2,"input":"audio","output":"audio","voices":[{"id":"v1","language":"en-US"}]}`)
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "serial":
		hello.MaxJobs = 1
	case "batch", "batchlax", "batchmix":
		hello.MaxBatch = 3
	case "text":
		hello.Input = "text"
	}
	fmt.Fprintln(os.Stderr, "test stage", mode, "starting")
	err := stageprog.Serve(context.Background(), stageprog.Stdin(), stageprog.Stdout(), hello, &testStage{mode: mode, input: engine.Kind(hello.Input)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test stage:", err)
		return 1
	}
	if mode == "badexit" {
		fmt.Fprintln(os.Stderr, "exiting badly")
		return 1
	}
	return 0
}

// testStage is the engine the test program serves.
type testStage struct {
	mode  string
	input engine.Kind
}

func (s *testStage) Warm(context.Context) error {
	if s.mode == "refuse" {
		return errors.New("no model here")
	}
	return nil
}

func (s *testStage) Close() error { return nil }

// gain decodes the params.
func (s *testStage) gain(params json.RawMessage) (float64, error) {
	var p struct {
		Gain *float64 `json:"gain"`
	}
	if s.mode == "anyparams" {
		return 1, nil
	}
	if err := engine.DecodeParams(params, &p); err != nil {
		return 0, err
	}
	switch {
	case p.Gain == nil:
		return 1, nil
	case *p.Gain < 0 || *p.Gain > 4:
		return 0, &engine.ParamError{Field: "gain", Reason: "must be between 0 and 4"}
	}
	return *p.Gain, nil
}

func (s *testStage) CheckParams(params json.RawMessage) error {
	_, err := s.gain(params)
	return err
}

// Process echoes audio scaled by the gain, and makes a text chunk's
// length in samples of audio; the mode changes that at the second chunk.
func (s *testStage) Process(ctx context.Context, job *engine.Job) error {
	gain, err := s.gain(job.Params)
	if err != nil {
		return err
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
			if s.input == engine.KindText {
				return job.Out.Send(ctx, engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, EndOfSentence: true}})
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case s.mode != "lax" && c.Kind() != s.input:
			return &engine.InputError{Reason: fmt.Sprintf("want %s, got %s", s.input, c.Kind())}
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
		}
		if err := job.Out.Send(ctx, echo(c, gain)); err != nil {
			return err
		}
	}
}

// echo is c's audio scaled by gain, or a text chunk's length in samples.
func echo(c engine.Chunk, gain float64) engine.Chunk {
	if c.Audio == nil {
		return engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, Samples: make([]int16, len(c.Text.Text))}}
	}
	a := *c.Audio
	a.Samples = make([]int16, len(c.Audio.Samples))
	for i, v := range c.Audio.Samples {
		a.Samples[i] = int16(float64(v) * gain)
	}
	return engine.Chunk{Audio: &a}
}

// RunBatch echoes each job's chunk as Process does its first; a chunk of
// a kind the stage does not take, or a gain out of range, fails its job
// alone. In mode batchmix each job gets the next one's output.
func (s *testStage) RunBatch(_ context.Context, items []*engine.BatchItem) error {
	for _, it := range items {
		u := it.Input.(*stageprog.BatchUnit)
		gain, err := s.gain(u.Job.Params)
		switch {
		case err != nil:
			it.Err = err
		case s.mode != "batchlax" && u.Chunk.Kind() != s.input:
			it.Err = &engine.InputError{Reason: fmt.Sprintf("want %s, got %s", s.input, u.Chunk.Kind())}
		default:
			it.Output = []engine.Chunk{echo(u.Chunk, gain)}
		}
	}
	if s.mode == "batchmix" && len(items) > 1 {
		first := items[0].Output
		for i := range items[:len(items)-1] {
			items[i].Output = items[i+1].Output
		}
		items[len(items)-1].Output = first
	}
	return nil
}
