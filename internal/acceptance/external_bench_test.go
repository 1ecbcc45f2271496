package acceptance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/stageproto"
	"github.com/omnistage/omnistage/internal/testkit"
	"github.com/omnistage/omnistage/internal/testkit/stageprog"
)

// passThrough is the built-in tts pipeline with an echo stage program
// after the vocoder, before the aligner (audio in, the same audio out),
// its options (the program's command) to fill in.
const passThrough = `
pipeline:
  name: tts-python
  input: text
  stages:
    - {id: 0, name: talker,  engine: flite-talker,  input: text,   output: frames}
    - {id: 1, name: vocoder, engine: flite-vocoder, input: frames, output: audio}
    - {id: 2, name: echo,    engine: external,      input: audio,  output: audio, final_output: true}
  aligner: {engine: sphinx-aligner}
deploy:
  stages:
    - {id: 2, options: %s}
`

// goEchoStageEnv set to 1 makes the test binary a Go stage program that
// echoes audio (stageprog, the Go side of the protocol): the control of
// BenchmarkExternalFirstAudio.
const goEchoStageEnv = "OMNISTAGE_ACCEPTANCE_GO_ECHO"

// runGoEcho serves the Go echo stage on standard input and output.
func runGoEcho() int {
	hello := stageproto.Hello{Name: "go-echo", Input: "audio", Output: "audio", MaxJobs: 4}
	if err := stageprog.Serve(context.Background(), stageprog.Stdin(), stageprog.Stdout(), hello, testengine.Echo{}); err != nil {
		fmt.Fprintln(os.Stderr, "go echo:", err)
		return 1
	}
	return 0
}

// BenchmarkExternalFirstAudio measures the time to the first audio of
// benchParagraph through the orchestrator with the built-in tts pipeline
// ("tts") and with a Python pass-through stage after its vocoder
// ("python"), one request at a time, in turn within each iteration so that
// both see the same machine. tts-ttfa-ms and python-ttfa-ms are the
// medians of each; added-ms is the median of what the stage added within
// an iteration, ratio the median of the iterations' ratios. stage-ms is
// the median time from the vocoder's first output to the Python stage's,
// in the python request's own timeline: what the stage adds, without the
// talker's and vocoder's variation from one request to the next.
// go-stage-ms and go-added-ms are the same for a Go echo program in its
// place (a third request each iteration): the control, which tells the
// SDK's share from what any stage program pays on this machine (the pipe,
// a job's start, waiting for a core while Flite works).
func BenchmarkExternalFirstAudio(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("needs python3")
	}
	sdk, err := filepath.Abs(filepath.Join(repoDir, "sdk/python"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := testkit.Parse(b, fmt.Sprintf(passThrough, fmt.Sprintf(`{command: ["python3", %q, "audio"], env: {PYTHONPATH: %q}}`, filepath.Join(sdk, "tests/echo.py"), sdk)))
	goCfg := testkit.Parse(b, fmt.Sprintf(passThrough, fmt.Sprintf(`{command: [%q, "-test.run=^$"], env: {%s: "1"}}`, os.Args[0], goEchoStageEnv)))
	plain, python, goPeer := startPipeline(b, "tts"), startConfig(b, cfg), startConfig(b, goCfg)
	var tts, py, added, goAdded []time.Duration
	var ratio, stage, goStage []float64
	b.ResetTimer()
	for b.Loop() {
		_, first := request(b, plain, benchParagraph, "audio")
		through, st := timedRequest(b, python, benchParagraph)
		goThrough, gst := timedRequest(b, goPeer, benchParagraph)
		tts, py, added = append(tts, first), append(py, through), append(added, through-first)
		goAdded = append(goAdded, goThrough-first)
		ratio = append(ratio, float64(through)/float64(first))
		stage = append(stage, st[2].FirstOutputMs-st[1].FirstOutputMs)
		goStage = append(goStage, gst[2].FirstOutputMs-gst[1].FirstOutputMs)
	}
	slices.Sort(ratio)
	slices.Sort(stage)
	slices.Sort(goStage)
	b.ReportMetric(stage[len(stage)/2], "stage-ms")
	b.ReportMetric(goStage[len(goStage)/2], "go-stage-ms")
	b.ReportMetric(ms(medianOf(tts)), "tts-ttfa-ms")
	b.ReportMetric(ms(medianOf(py)), "python-ttfa-ms")
	b.ReportMetric(ms(medianOf(added)), "added-ms")
	b.ReportMetric(ms(medianOf(goAdded)), "go-added-ms")
	b.ReportMetric(ratio[len(ratio)/2], "ratio")
}

// timedRequest runs text through o, audio only, and returns the time to
// its first audio and its stages' timings.
func timedRequest(b *testing.B, o *orchestrator.Orchestrator, text string) (time.Duration, []orchestrator.StageTiming) {
	ctx := context.Background()
	start := time.Now()
	s, err := o.Submit(ctx, orchestrator.Request{Prompt: engine.Prompt{Text: text}, Modalities: []string{"audio"}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var first time.Duration
	for {
		out, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if out.Chunk.Audio != nil && first == 0 {
			first = time.Since(start)
		}
	}
	timings := s.Timings()
	if first == 0 || len(timings) < 3 {
		b.Fatalf("first audio %s, %d stage timings", first, len(timings))
	}
	return first, timings
}
