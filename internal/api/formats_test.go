package api

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
)

// decode decodes an encoded answer with ffmpeg, an independent decoder,
// into 16 kHz mono samples.
func decode(t *testing.T, data []byte) []int16 {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("no ffmpeg (scripts/install-deps.sh installs it)")
	}
	cmd := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", "16000", "pipe:1")
	cmd.Stdin = bytes.NewReader(data)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, errb.String())
	}
	s, err := audio.PCMSamples(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSpeechFormats checks every encoded response format, whole and as a
// stream of chunked audio, through ffmpeg: the content type is OpenAI's,
// mp3 is the default, flac decodes to the very samples, a lossy format to
// as many samples as the audio holds (give or take the codec's padding),
// and a stream decodes as the whole file does.
func TestSpeechFormats(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	want := expectedSpeech(hello, "slt", 1)
	for _, tc := range []struct {
		format, contentType string
		pad                 int // samples a decode may hold beyond the audio
	}{
		{"", "audio/mpeg", 1152 + 1105},
		{"mp3", "audio/mpeg", 1152 + 1105},
		{"opus", "audio/opus", 960},
		{"aac", "audio/aac", 2048 + 1024},
		{"flac", "audio/flac", 0},
	} {
		name := tc.format
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			var decoded [2][]int16
			for i, stream := range []string{"", "audio"} {
				req := map[string]any{"model": "tts-1", "input": hello}
				if tc.format != "" {
					req["response_format"] = tc.format
				}
				if stream != "" {
					req["stream_format"] = stream
				}
				resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", req)
				if resp.StatusCode != http.StatusOK || resp.Trailer.Get("X-Stream-Error") != "" {
					t.Fatalf("stream %q: status %d %s %s", stream, resp.StatusCode, resp.Trailer.Get("X-Stream-Error"), body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != tc.contentType {
					t.Errorf("stream %q: Content-Type %q, want %q", stream, ct, tc.contentType)
				}
				decoded[i] = decode(t, body)
			}
			whole, streamed := decoded[0], decoded[1]
			if n := len(whole); n < len(want) || n > len(want)+tc.pad {
				t.Errorf("the whole file decodes to %d samples; the audio has %d (pad up to %d)", n, len(want), tc.pad)
			}
			if tc.pad == 0 && !equalSamples(whole, want) {
				t.Error("flac does not decode to the audio's samples")
			}
			if !equalSamples(whole, streamed) {
				t.Errorf("the stream decodes to %d samples that differ from the whole file's %d", len(streamed), len(whole))
			}
		})
	}
}

func equalSamples(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSpeechAACWithoutFFmpeg checks that aac is refused up front, naming
// the reason, where ffmpeg is missing.
func TestSpeechAACWithoutFFmpeg(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	t.Setenv("PATH", t.TempDir())
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "hi", "response_format": "aac"})
	wantError(t, resp, body, 400, "bad_request", "ffmpeg")
	if !strings.Contains(string(body), "not on PATH") {
		t.Errorf("body %s", body)
	}
}
