package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testdeps"
)

// sdkStage is a stage of one's own, outside the repository, on the
// installed SDK: a tone of 0.3 s per sentence, as each sentence's end
// arrives.
const sdkStage = `import math

import omnistage_stage as st

RATE = 16000


class Tone(st.Stage):
    name = "tone"
    input, output = "text", "audio"

    def process(self, job):
        tone = st.pcm16(0.3 * math.sin(2 * math.pi * 440 * i / RATE) for i in range(3 * RATE // 10))
        for _sentence in st.sentences(job):
            st.send_pcm(job, RATE, tone, end_of_sentence=True)


if __name__ == "__main__":
    st.run(Tone())
`

// sdkPipeline runs the stage in dir.
const sdkPipeline = `pipeline:
  name: tone
  input: text
  stages:
    - {id: 0, name: tone, engine: external, input: text, output: audio, final_output: true}
deploy:
  stages:
    - {id: 0, options: {command: ["python3", "stage.py"], cwd: %q}}
`

// TestPythonSDKInstalled installs the Python SDK as a stage author does,
// into a fresh virtualenv with pip and no network (pip install
// ./sdk/python), and runs a stage outside the repository with it, with no
// PYTHONPATH: omnistage stage check passes, and a pipeline speaks. Without
// the virtualenv, the check fails saying why.
func TestPythonSDKInstalled(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testdeps.Missing(t, "no python3")
	}
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(python, "-m", "venv", venv).CombinedOutput(); err != nil {
		testdeps.Missing(t, "python3 -m venv does not work here (on Debian: apt-get install python3-venv): %v\n%s", err, out)
	}
	sdk, err := filepath.Abs(filepath.Join(repoDir, "sdk/python"))
	if err != nil {
		t.Fatal(err)
	}
	// No index: the build needs nothing from one.
	pip := command(t, nil, filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "--no-input", "--no-index", sdk)
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install %s: %v\n%s", sdk, err, out)
	}
	stage := filepath.Join(dir, "stage")
	if err := os.Mkdir(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stage, "stage.py"), []byte(sdkStage), 0o644); err != nil {
		t.Fatal(err)
	}
	withVenv := []string{"PATH=" + filepath.Join(venv, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")}

	check := command(t, withVenv, omnistage(t), "stage", "check", "--", "python3", "stage.py")
	check.Dir = stage
	out, err := check.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS hello: tone takes text, makes audio") {
		t.Fatalf("stage check with the SDK installed: %v\n%s", err, out)
	}

	cfg := writeFile(t, "tone.yaml", fmt.Sprintf(sdkPipeline, stage))
	wav := filepath.Join(dir, "out.wav")
	say := command(t, withVenv, omnistage(t), "say", "--config", cfg, "-o", wav, "One sentence. And another.")
	if out, err := say.CombinedOutput(); err != nil {
		t.Fatalf("say through the stage: %v\n%s", err, out)
	}
	if a := readWAV(t, wav); a.SampleRate != 16000 || len(a.Samples) != 2*3*16000/10 {
		t.Errorf("say: %d samples at %d Hz; want two tones of 0.3 s at 16 kHz", len(a.Samples), a.SampleRate)
	}

	bare := command(t, nil, omnistage(t), "stage", "check", "--timeout", "5s", "--", "python3", "stage.py")
	bare.Dir = stage
	out, err = bare.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "No module named 'omnistage_stage'") ||
		!strings.Contains(string(out), "the program's environment is clean") || !strings.Contains(string(out), "--env K=V") {
		t.Errorf("stage check without the SDK: %v; want a failure saying the environment is clean\n%s", err, out)
	}
}

// command is name with args, bounded in time, in this process's
// environment without PYTHONPATH, with env added.
func command(t *testing.T, env []string, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, name, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYTHONPATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = bytes.NewReader(nil)
	return cmd
}
