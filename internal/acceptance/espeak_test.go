package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
)

// repoDir is the repository's root, from this package's directory.
const repoDir = "../.."

// espeakConfig returns examples/espeak/pipeline.yaml with the commands of
// its stages made absolute, so that a server runs it from any directory,
// and, when deploy is not "", its deploy section replaced.
func espeakConfig(tb testing.TB, deploy string) string {
	tb.Helper()
	for _, tool := range []string{"python3", "espeak-ng"} {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("the espeak example needs %s: %v", tool, err)
		}
	}
	abs, err := filepath.Abs(repoDir)
	if err != nil {
		tb.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(abs, "examples/espeak/pipeline.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(text), `"examples/espeak/`, `"`+abs+`/examples/espeak/`)
	if deploy != "" {
		cfg = cfg[:strings.Index(cfg, "deploy:")] + deploy
	}
	return writeFile(tb, "espeak.yaml", cfg)
}

// TestEspeakExample serves examples/espeak, a second, independent TTS
// engine written as two Python stages (espeak-ng's phonemes, then its
// audio at 22 050 Hz), with the aligner after them: in one server, then
// across two stage servers, which give the same audio and timestamps.
func TestEspeakExample(t *testing.T) {
	cfg := espeakConfig(t, "")
	text := "Hello from espeak. A second engine speaks through omnistage, with word timestamps!"
	one := serve(t, "--config", cfg)
	got := generate(t, one.url, text)
	if got.audio.SampleRate != 22050 || seconds(got.audio) < 2 || seconds(got.audio) > 12 {
		t.Fatalf("audio: %d Hz, %.2f s", got.audio.SampleRate, seconds(got.audio))
	}
	checkTimestamps(t, got.words, strings.Fields(strings.ToLower(strings.Map(func(r rune) rune {
		if strings.ContainsRune(".,!", r) {
			return -1
		}
		return r
	}, text))), seconds(got.audio))

	// The talker's voices are the ones the phonemizer names; a param it
	// refuses is the request's 400, naming the stage and the field.
	var voices apijson.VoiceList
	getJSON(t, one.url+"/v1/audio/voices", &voices)
	ids := []string{}
	for _, v := range voices.Voices {
		ids = append(ids, v.ID)
	}
	if !slices.Contains(ids, "en-us") || !slices.Contains(ids, "de") || slices.Contains(ids, "alloy") {
		t.Errorf("voices %v: want espeak's, and no alias of flite's", ids)
	}
	status, body := postSpeech(t, one.url, map[string]any{"model": "espeak", "input": "Hallo Welt.", "voice": "de", "response_format": "wav"})
	if status != http.StatusOK || len(body) < 10000 {
		t.Errorf("German: %d, %d bytes", status, len(body))
	}
	status, body = postSpeech(t, one.url, map[string]any{"model": "espeak", "input": "Hello.", "voice": "klingon"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), `unknown voice \"klingon\": voices are en-us`) {
		t.Errorf("unknown voice: %d %s", status, body)
	}
	b, _ := json.Marshal(map[string]any{"input": "Hello.", "sampling_params": []any{map[string]any{"speed": 9}}})
	resp, err := http.Post(one.url+"/v1/generate", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "stage 0 (phonemizer): invalid sampling params: speed: must be a number from 0.25 to 4") {
		t.Errorf("bad speed: %d %s", resp.StatusCode, body)
	}

	// The same stages on two stage servers, behind a front end with the
	// aligner.
	s0 := serve(t, "--stage", "0", "--config", cfg)
	s1 := serve(t, "--stage", "1", "--config", cfg)
	front := serve(t, "--config", espeakConfig(t, fmt.Sprintf(`deploy:
  stages:
    - {id: 0, placement: remote, endpoints: [%q]}
    - {id: 1, placement: remote, endpoints: [%q]}
`, s0.url, s1.url)))
	apart := generate(t, front.url, text)
	if !reflect.DeepEqual(apart.audio, got.audio) || !reflect.DeepEqual(apart.words, got.words) {
		t.Errorf("across stage servers: %.2f s and %d words; in one server %.2f s and %d words", seconds(apart.audio), len(apart.words), seconds(got.audio), len(got.words))
	}
}

// postSpeech posts a speech request and returns the answer's status and
// body.
func postSpeech(t *testing.T, url string, req map[string]any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(url+"/v1/audio/speech", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
}
