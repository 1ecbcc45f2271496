package api

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// decode decodes an encoded answer with ffmpeg, an independent decoder,
// into 16 kHz mono samples.
func decode(t *testing.T, data []byte) []int16 {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		testdeps.Missing(t, "no ffmpeg (scripts/install-deps.sh installs it)")
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
// and a stream decodes as the whole file does, but for mp3, whose stream
// has no Info tag: it decodes as the whole file after LAME's and the
// decoder's delay.
func TestSpeechFormats(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	want := expectedSpeech(hello, "slt", 1)
	for _, tc := range []struct {
		format, contentType string
		pad                 int // samples a decode may hold beyond the audio
		streamLead          int // samples a stream plays before the whole file's first
	}{
		{"", "audio/mpeg", 1152 + 1105, 1105},
		{"mp3", "audio/mpeg", 1152 + 1105, 1105},
		{"opus", "audio/opus", 960, 0},
		{"aac", "audio/aac", 2048 + 1024, 0},
		{"flac", "audio/flac", 0, 0},
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
			if len(streamed) < tc.streamLead || !equalSamples(whole, streamed[tc.streamLead:]) {
				t.Errorf("the stream decodes to %d samples that, after the first %d, differ from the whole file's %d",
					len(streamed), tc.streamLead, len(whole))
			}
		})
	}
}

// TestStreamedMP3Length checks that a streamed mp3 answer, saved as a
// client saves it (the chunked body, mp3 by default, or the sse deltas
// joined), shows its real length: it starts with no Info or Xing tag (a
// stream's tag, written before the end, could only make up a frame
// count: 9.3 hours at 16 kHz), and ffprobe's duration of the file is
// within a frame of what ffmpeg decodes from it, which is the speech,
// then LAME's and the decoder's delay (encode.Lead) and less than two
// frames of LAME's padding.
func TestStreamedMP3Length(t *testing.T) {
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			testdeps.Missing(t, "no %s (scripts/install-deps.sh installs ffmpeg)", tool)
		}
	}
	f := newFixture(t, setup{yaml: speechYAML})
	speech := len(expectedSpeech(hello, "slt", 1))
	lead := int(encode.Lead(encode.MP3, fakeRate, encode.Options{Stream: true}) * fakeRate / time.Second)
	const frame = 576 // samples in an MPEG-2 frame, at 16 kHz
	resp, chunked := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
		map[string]any{"model": "tts-1", "input": hello, "stream_format": "audio"})
	if resp.StatusCode != http.StatusOK || resp.ContentLength != -1 || resp.Header.Get("Content-Type") != "audio/mpeg" {
		t.Fatalf("status %d, length %d, type %q: %s", resp.StatusCode, resp.ContentLength, resp.Header.Get("Content-Type"), chunked)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"chunked", chunked},
		{"sse", speak(t, f, "tts-1", hello, encode.MP3, true).audio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if head := tc.data[:min(len(tc.data), 64)]; bytes.Contains(head, []byte("Info")) || bytes.Contains(head, []byte("Xing")) {
				t.Errorf("the stream starts with a tag: % x", head)
			}
			file := filepath.Join(t.TempDir(), "speech.mp3")
			if err := os.WriteFile(file, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			probe, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", file).Output()
			if err != nil {
				t.Fatalf("ffprobe: %v", err)
			}
			seconds, err := strconv.ParseFloat(strings.TrimSpace(string(probe)), 64)
			if err != nil {
				t.Fatalf("ffprobe's duration %q: %v", probe, err)
			}
			decoded := len(decode(t, tc.data))
			t.Logf("ffprobe: %.3f s; ffmpeg decodes %d samples: the speech's %d, a lead of %d, then %d",
				seconds, decoded, speech, lead, decoded-speech-lead)
			if d := seconds*fakeRate - float64(decoded); math.Abs(d) > frame {
				t.Errorf("ffprobe says %.3f s, %.0f samples more than the %d ffmpeg decodes", seconds, d, decoded)
			}
			if pad := decoded - speech - lead; pad < 0 || pad >= 2*frame {
				t.Errorf("ffmpeg decodes %d samples: the speech's %d and a lead of %d, then %d", decoded, speech, lead, pad)
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
