package acceptance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/testkit"
)

// passThrough is the built-in tts pipeline with a Python stage of the
// SDK's echo after the vocoder, before the aligner: audio in, the same
// audio out.
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
    - {id: 2, options: {command: ["python3", %q, "audio"], env: {PYTHONPATH: %q}}}
`

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
func BenchmarkExternalFirstAudio(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("needs python3")
	}
	sdk, err := filepath.Abs(filepath.Join(repoDir, "sdk/python"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := testkit.Parse(b, fmt.Sprintf(passThrough, filepath.Join(sdk, "tests/echo.py"), sdk))
	plain, python := startPipeline(b, "tts"), startConfig(b, cfg)
	var tts, py, added []time.Duration
	var ratio, stage []float64
	b.ResetTimer()
	for b.Loop() {
		_, first := request(b, plain, benchParagraph, "audio")
		through, st := timedRequest(b, python, benchParagraph)
		tts, py, added = append(tts, first), append(py, through), append(added, through-first)
		ratio = append(ratio, float64(through)/float64(first))
		stage = append(stage, st[2].FirstOutputMs-st[1].FirstOutputMs)
	}
	slices.Sort(ratio)
	slices.Sort(stage)
	b.ReportMetric(stage[len(stage)/2], "stage-ms")
	b.ReportMetric(ms(medianOf(tts)), "tts-ttfa-ms")
	b.ReportMetric(ms(medianOf(py)), "python-ttfa-ms")
	b.ReportMetric(ms(medianOf(added)), "added-ms")
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
