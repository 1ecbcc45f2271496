package api

// vLLM-Omni's streaming speech client against the built-in pipeline.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// vllmText is the example client's own example text.
const vllmText = "Hello world. How are you? I am fine."

// pythonWithWebsockets returns a Python 3 that imports websockets (the
// first of python3 on PATH and Debian's), or skips the test.
func pythonWithWebsockets(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import websockets").Run() == nil {
			return p
		}
	}
	testdeps.Missing(t, "no python3 imports websockets (scripts/install-deps.sh --test installs Debian's python3-websockets)")
	return ""
}

// TestVLLMOmniClient runs a client of vLLM-Omni's streaming speech
// protocol (testdata/vllm_stream_client.py, which behaves as vLLM-Omni's
// example client; OMNISTAGE_VLLM_OMNI_CLIENT may name that client itself)
// against the built-in pipeline: with its defaults (wav, speaker Vivian,
// task_type CustomVoice, language Auto), each format it offers, its text
// word by word, split_granularity none and clause, and its word
// timestamps (asked for in the URL). Each sentence file holds that
// sentence's audio, and back to back they are the text posted whole
// (for mp3 and aac, what HTTP streams of it).
func TestVLLMOmniClient(t *testing.T) {
	python := pythonWithWebsockets(t)
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		testdeps.Missing(t, "no ffmpeg: it decodes flac, opus and aac, and encodes aac")
	}
	client, _ := filepath.Abs("testdata/vllm_stream_client.py")
	if c := os.Getenv("OMNISTAGE_VLLM_OMNI_CLIENT"); c != "" {
		client = c
	}
	f := realFixture(t, "builtin:tts", "")
	whole := wholePCM(t, f, vllmText)
	for _, tc := range []struct {
		name   string
		query  string
		args   []string
		format string
		units  int
	}{
		{"defaults", "", nil, "wav", 3},
		{"pcm", "", []string{"--response-format", "pcm"}, "pcm", 3},
		{"flac", "", []string{"--response-format", "flac"}, "flac", 3},
		{"mp3", "", []string{"--response-format", "mp3"}, "mp3", 3},
		{"aac", "", []string{"--response-format", "aac"}, "aac", 3},
		{"opus", "", []string{"--response-format", "opus"}, "opus", 3},
		{"word by word", "", []string{"--simulate-stt", "--stt-delay", "0.01", "--response-format", "pcm", "--stream-audio"}, "pcm", 3},
		{"split none", "", []string{"--split-granularity", "none", "--response-format", "pcm"}, "pcm", 1},
		{"timestamps", "word_timestamps_form=audio.chunk", []string{"--word-timestamps"}, "pcm", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			url := wsURL(f.url)
			if tc.query != "" {
				url += "?" + tc.query
			}
			cmd := exec.Command(python, append([]string{client, "--url", url, "--text", vllmText, "--output-dir", dir}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil || bytes.Contains(out, []byte("ERROR")) || bytes.Contains(bytes.ToLower(out), []byte("unknown message")) {
				t.Fatalf("the client: %v\n%s", err, out)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "utterance_000_sentence_*."+tc.format))
			if len(files) != tc.units {
				t.Fatalf("%d files of %s, want %d:\n%s", len(files), tc.format, tc.units, out)
			}
			var got []byte
			for _, file := range files {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, vllmDecode(t, tc.format, b)...)
			}
			want := whole
			if utteranceWide(tc.format) {
				resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
					map[string]any{"model": "tts", "input": vllmText, "response_format": tc.format, "stream_format": "audio"})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST /v1/audio/speech: %d", resp.StatusCode)
				}
				want = body
			}
			if tc.format == "opus" {
				// Lossy: as long as the text's audio, to the sample.
				if len(got) != len(want) {
					t.Errorf("opus decodes to %d samples, the text's audio is %d", len(got)/2, len(want)/2)
				}
			} else if !bytes.Equal(got, want) {
				t.Errorf("the sentences make %d bytes, not the %d of the text posted whole", len(got), len(want))
			}
			if tc.query != "" {
				checkVLLMTimestamps(t, dir, files)
			}
		})
	}
}

// vllmDecode returns a sentence file's samples, as 16-bit PCM (pcm, wav,
// flac, opus), or its bytes (mp3, aac).
func vllmDecode(t *testing.T, format string, b []byte) []byte {
	t.Helper()
	switch format {
	case "pcm", "mp3", "aac":
		return b
	case "wav":
		return b[audio.WAVHeaderLen:]
	}
	cmd := exec.Command("ffmpeg", "-v", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", "16000", "pipe:1")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg cannot decode the %s sentence: %v", format, err)
	}
	return out
}

// checkVLLMTimestamps checks the sentences' timestamps files: words of the
// sentence's text, from its start, within its audio.
func checkVLLMTimestamps(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, file := range files {
		b, err := os.ReadFile(strings.TrimSuffix(file, ".pcm") + "_timestamps.json")
		if err != nil {
			t.Fatal(err)
		}
		var ts struct {
			SentenceText string       `json:"sentence_text"`
			Timestamps   *[]chunkWord `json:"timestamps"`
		}
		if err := json.Unmarshal(b, &ts); err != nil {
			t.Fatal(err)
		}
		pcm, _ := os.ReadFile(file)
		durMs := len(pcm) * 1000 / 32000
		if ts.Timestamps == nil || len(*ts.Timestamps) == 0 {
			t.Errorf("%s: no timestamps", filepath.Base(file))
			continue
		}
		for _, w := range *ts.Timestamps {
			if !strings.Contains(ts.SentenceText, w.Word) || w.StartMs < 0 || w.EndMs < w.StartMs || w.EndMs > durMs {
				t.Errorf("%s (%q, %d ms): word %+v", filepath.Base(file), ts.SentenceText, durMs, w)
			}
		}
	}
}
