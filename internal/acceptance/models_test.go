package acceptance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
)

// heldPipeline is a pipeline of one Python stage that holds its jobs until
// a file exists (testdata/held.py), admitting two requests at once.
const heldPipeline = `
pipeline:
  name: held
  input: text
  stages:
    - {id: 0, name: holder, engine: external, input: text, output: audio, final_output: true}
deploy:
  max_inflight: 2
  stages:
    - {id: 0, options: {command: ["python3", %q], env: {PYTHONPATH: %q, RELEASE: %q}}}
`

// TestManyPipelinesOneServer serves the built-in tts and tts-24k, the
// espeak example (two Python stages) and a pipeline that holds its jobs,
// in one server. The OpenAI Node SDK, unchanged, lists the models and
// speaks with each pipeline by its model, each at its own rate;
// /v1/audio/models and each model's voices say what each serves, and the
// metrics count each pipeline's requests apart. While the held pipeline
// is past its admission limit (its excess refused at once with 503), the
// other pipelines serve every request.
func TestManyPipelinesOneServer(t *testing.T) {
	sdk := filepath.Join(repoDir, "test/openai-node")
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "openai")); err != nil {
		t.Skip("the OpenAI SDK is not installed: run scripts/install-deps.sh")
	}
	abs, _ := filepath.Abs(repoDir)
	release := filepath.Join(t.TempDir(), "release")
	held := writeFile(t, "held.yaml", fmt.Sprintf(heldPipeline, filepath.Join(abs, "internal/acceptance/testdata/held.py"), filepath.Join(abs, "sdk/python"), release))
	s := serve(t, "--config", "builtin:tts", "--config", "builtin:tts-24k", "--config", espeakConfig(t, ""), "--config", held)

	// Fill the held pipeline's limit, then check that its excess is
	// refused while the others serve.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if status, body := postSpeech(t, s.url, map[string]any{"model": "held", "input": fmt.Sprintf("Held %d.", i), "response_format": "pcm"}); status != http.StatusOK {
				t.Errorf("held request: %d %s", status, body)
			}
		})
	}
	within(t, sayTimeout, "two held requests in flight", func() bool {
		return metric(t, s.url, "", `omnistage_requests_inflight{pipeline="held"}`) == 2
	})
	for range 4 {
		if status, body := postSpeech(t, s.url, map[string]any{"model": "held", "input": "One too many.", "response_format": "pcm"}); status != http.StatusServiceUnavailable || !strings.Contains(string(body), "overloaded") {
			t.Errorf("over the limit: %d %s", status, body)
		}
	}
	models := nodeModels(t, sdk, s.url, "tts", "tts-24k", "espeak")
	for _, want := range []string{"tts", "tts-24k", "espeak", "held", "tts-1"} {
		if !slices.Contains(models, want) {
			t.Errorf("models.list() gave %v, without %s", models, want)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	var audioModels apijson.AudioModels
	getJSON(t, s.url+"/v1/audio/models", &audioModels)
	if len(audioModels.Models) < 4 || audioModels.Models[0].ID != "tts" {
		t.Errorf("/v1/audio/models: %+v", audioModels)
	}
	for model, voice := range map[string]string{"tts": "slt", "espeak": "de"} {
		var voices apijson.VoiceList
		getJSON(t, s.url+"/v1/audio/voices?model="+model, &voices)
		if !slices.ContainsFunc(voices.Voices, func(v apijson.VoiceEntry) bool { return v.ID == voice }) {
			t.Errorf("voices of %s lack %s", model, voice)
		}
	}
	for model, n := range map[string]float64{"tts": 1, "tts-24k": 1, "espeak": 1, "held": 2} {
		if got := metric(t, s.url, "", fmt.Sprintf(`omnistage_requests_total{outcome="ok",pipeline=%q}`, model)); got != n {
			t.Errorf("%s: %g requests ok, want %g", model, got, n)
		}
	}
	if got := metric(t, s.url, "", `omnistage_requests_total{outcome="overloaded",pipeline="held"}`); got != 4 {
		t.Errorf("held: %g refused, want 4", got)
	}
}

// nodeModels runs test/openai-node/models.mjs against url for models and
// checks each answer is a WAV at its pipeline's rate; it returns the ids
// the SDK's models.list() gave.
func nodeModels(t *testing.T, sdk, url string, models ...string) []string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("node", append([]string{"models.mjs", url, out}, models...)...)
	cmd.Dir = sdk
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node models.mjs: %v\n%s", err, stderr.String())
	}
	rate := map[string]int{"tts": 16000, "tts-24k": 24000, "espeak": 22050}
	var listed []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var line struct {
			Models                   []string
			Model, File, ContentType string
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if line.Models != nil {
			listed = line.Models
			continue
		}
		a := readWAV(t, line.File)
		if line.ContentType != "audio/wav" || a.SampleRate != rate[line.Model] || seconds(a) < 1 {
			t.Errorf("%s: %s, %d Hz, %.2f s", line.Model, line.ContentType, a.SampleRate, seconds(a))
		}
	}
	return listed
}
