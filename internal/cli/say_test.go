package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testdeps"
)

func runCLIStdin(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	return out.String(), errb.String(), code
}

func TestSayWithTimestamps(t *testing.T) {
	wav := filepath.Join(t.TempDir(), "out.wav")
	text := "The quick brown fox jumps over 2 lazy dogs. It was 5:30 p.m."
	stdout, stderr, code := runCLIStdin(t, text, "say", "--timestamps", "-o", wav, "--voice", "rms", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := os.Open(wav)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := audio.ReadWAV(f)
	if err != nil {
		t.Fatal(err)
	}
	seconds := float64(len(a.Samples)) / float64(a.SampleRate)
	if a.SampleRate != 16000 || seconds < 2 || seconds > 10 {
		t.Fatalf("audio: %d Hz, %.2f s", a.SampleRate, seconds)
	}
	var words []engine.Word
	if err := json.Unmarshal([]byte(stdout), &words); err != nil {
		t.Fatalf("timestamps JSON: %v\n%s", err, stdout)
	}
	if len(words) < 12 {
		t.Fatalf("got %d words: %+v", len(words), words)
	}
	durMs := int(seconds * 1000)
	prevEnd := 0
	for _, w := range words {
		if w.StartMs < prevEnd || w.EndMs < w.StartMs || w.EndMs > durMs {
			t.Errorf("word %+v out of order or bounds (previous end %d, audio %d ms)", w, prevEnd, durMs)
		}
		prevEnd = w.EndMs
	}
	// Entries are the input's tokens, with the words spoken for them.
	if words[0].Word != "The" || words[5].Word != "over" || words[6].Word != "2" || !slices.Equal(words[6].Spoken, []string{"two"}) {
		t.Errorf("words = %+v", words)
	}
}

func TestSayErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"say"}, 2, "no text given"},
		{[]string{"say", "--voice", "nobody", "hi"}, 2, "nobody"},
		{[]string{"say", "--speed", "9", "hi"}, 2, "--speed 9 is out of range"},
		{[]string{"say", "-o", "-", "--timestamps", "hi"}, 2, "would both write to stdout"},
		{[]string{"say", "-"}, 2, "the text is empty"},
	}
	for _, tc := range cases {
		_, stderr, code := runCLIStdin(t, "  ", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

func TestSayToStdout(t *testing.T) {
	stdout, stderr, code := runCLIStdin(t, "", "say", "-o", "-", "--config", "builtin:tts-24k", "Hello.")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, err := audio.ReadWAV(strings.NewReader(stdout))
	if err != nil {
		t.Fatal(err)
	}
	if a.SampleRate != 24000 || len(a.Samples) < 12000 {
		t.Errorf("audio %d Hz, %d samples", a.SampleRate, len(a.Samples))
	}
}

// TestSayFormatsAndCaptions checks that -o's extension (or --format) picks
// the encoder, and that --captions writes cues of the same speech.
func TestSayFormatsAndCaptions(t *testing.T) {
	if _, err := exec.LookPath("ffprobe"); err != nil {
		testdeps.Missing(t, "no ffprobe (scripts/install-deps.sh installs ffmpeg)")
	}
	dir := t.TempDir()
	text := "Hello there! The fox paid $5 for 2 apples."
	for _, tc := range []struct {
		args        []string
		file, codec string
	}{
		{[]string{"-o", filepath.Join(dir, "a.mp3")}, "a.mp3", "mp3"},
		{[]string{"-o", filepath.Join(dir, "a.flac")}, "a.flac", "flac"},
		{[]string{"-o", filepath.Join(dir, "a.bin"), "--format", "opus"}, "a.bin", "opus"},
	} {
		args := append([]string{"say", "--captions", filepath.Join(dir, tc.file+".vtt")}, tc.args...)
		if _, stderr, code := runCLIStdin(t, "", append(args, text)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr)
		}
		out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", filepath.Join(dir, tc.file)).Output()
		if err != nil || strings.TrimSpace(string(out)) != tc.codec {
			t.Errorf("%s: ffprobe says %q (%v), want %s", tc.file, out, err, tc.codec)
		}
		vtt, err := os.ReadFile(filepath.Join(dir, tc.file+".vtt"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(vtt), "WEBVTT\n") || !strings.Contains(string(vtt), "\nHello there!\n") || !strings.Contains(string(vtt), "$5 for 2 apples.") {
			t.Errorf("captions:\n%s", vtt)
		}
	}
	if _, stderr, code := runCLIStdin(t, "", "say", "--captions", filepath.Join(dir, "x.txt"), "hi"); code != ExitUsage || !strings.Contains(stderr, ".vtt or .srt") {
		t.Errorf("captions to .txt: exit %d, %s", code, stderr)
	}
	if _, stderr, code := runCLIStdin(t, "", "say", "--format", "ogg", "hi"); code != ExitUsage || !strings.Contains(stderr, "mp3, opus") {
		t.Errorf("--format ogg: exit %d, %s", code, stderr)
	}
}

// TestSayAACTimestamps checks that the timestamps and captions of an aac
// file are 64 ms later than those of the same speech as wav: ADTS cannot
// state the encoder's priming, which players play first. mp3's Info tag
// states its delay, so its times are wav's.
func TestSayAACTimestamps(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		testdeps.Missing(t, "no ffmpeg (scripts/install-deps.sh installs it)")
	}
	dir := t.TempDir()
	text := "Hello there! The fox paid five dollars."
	say := func(ext string) ([]engine.Word, string) {
		out, vtt := filepath.Join(dir, "a."+ext), filepath.Join(dir, ext+".vtt")
		stdout, stderr, code := runCLIStdin(t, "", "say", "--timestamps", "--captions", vtt, "-o", out, text)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", ext, code, stderr)
		}
		var words []engine.Word
		if err := json.Unmarshal([]byte(stdout), &words); err != nil {
			t.Fatalf("%s: timestamps JSON: %v\n%s", ext, err, stdout)
		}
		b, err := os.ReadFile(vtt)
		if err != nil {
			t.Fatal(err)
		}
		return words, string(b)
	}
	wav, wavCaptions := say("wav")
	for _, tc := range []struct {
		ext      string
		shift    int
		firstCue string
	}{
		{"mp3", 0, "\n00:00:00.%03d --> "},
		{"aac", 64, "\n00:00:00.%03d --> "},
	} {
		words, captions := say(tc.ext)
		if len(words) != len(wav) {
			t.Fatalf("%s: %d words, wav has %d", tc.ext, len(words), len(wav))
		}
		for i := range wav {
			if words[i].StartMs != wav[i].StartMs+tc.shift || words[i].EndMs != wav[i].EndMs+tc.shift {
				t.Errorf("%s: word %+v, want wav's %+v %d ms later", tc.ext, words[i], wav[i], tc.shift)
			}
		}
		if cue := fmt.Sprintf(tc.firstCue, wav[0].StartMs+tc.shift); !strings.Contains(captions, cue) {
			t.Errorf("%s: captions without the cue time %q:\n%s\n(wav's:\n%s)", tc.ext, cue, captions, wavCaptions)
		}
	}
}

// TestSayVoiceAliases: --voice takes the pipeline's aliases as a speech
// request's voice does, and says which names it takes.
func TestSayVoiceAliases(t *testing.T) {
	dir := t.TempDir()
	speak := func(voice string) []byte {
		out := filepath.Join(dir, voice+".wav")
		if _, stderr, code := runCLIStdin(t, "", "say", "--voice", voice, "-o", out, "Hello there."); code != 0 {
			t.Fatalf("--voice %s: exit %d: %s", voice, code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(speak("Alloy"), speak("slt")) {
		t.Error("--voice Alloy does not speak as slt, the voice it stands for")
	}
	_, stderr, code := runCLIStdin(t, "", "say", "--voice", "nobody", "hi")
	if code != ExitUsage || !strings.Contains(stderr, "voices are slt, rms, awb, and the aliases ") || !strings.Contains(stderr, " alloy,") {
		t.Errorf("unknown voice: exit %d, %q", code, stderr)
	}
}

// TestSayBuildsWhatItUses: without --timestamps, say builds no aligner
// (its dictionary is most of a short say's work); with them, it does.
func TestSayBuildsWhatItUses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.wav")
	for _, tc := range []struct {
		args    []string
		aligner bool
	}{
		{[]string{"say", "-v", "-o", out, "Hi."}, false},
		{[]string{"say", "-v", "--timestamps", "-o", out, "Hi."}, true},
	} {
		_, stderr, code := runCLIStdin(t, "", tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr)
		}
		if got := strings.Contains(stderr, "replica=aligner/0"); got != tc.aligner {
			t.Errorf("%v: aligner built %v, want %v:\n%s", tc.args, got, tc.aligner, stderr)
		}
	}
}
