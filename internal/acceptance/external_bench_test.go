package acceptance

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
// both see the same machine. Compare the two ttfa-ms values of one run.
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
	var plainTotal, pythonTotal time.Duration
	b.ResetTimer()
	for b.Loop() {
		_, first := request(b, plain, benchParagraph, "audio")
		plainTotal += first
		_, first = request(b, python, benchParagraph, "audio")
		pythonTotal += first
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(plainTotal), "tts-ttfa-ms")
	b.ReportMetric(ms(pythonTotal), "python-ttfa-ms")
	b.ReportMetric(ms(pythonTotal)/ms(plainTotal), "ratio")
}
