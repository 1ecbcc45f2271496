package captions

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// entries makes timestamps for input, a token per field, 300 ms each.
func entries(input string) []engine.Word {
	var out []engine.Word
	runes := []rune(input)
	t := 0
	for i := 0; i < len(runes); {
		for i < len(runes) && (runes[i] == ' ' || runes[i] == '\n') {
			i++
		}
		start := i
		for i < len(runes) && runes[i] != ' ' && runes[i] != '\n' {
			i++
		}
		end := i
		for end > start && strings.ContainsRune(".,!?;:", runes[end-1]) {
			end--
		}
		if end > start {
			out = append(out, engine.Word{Word: string(runes[start:end]), CharStart: start, CharEnd: end, StartMs: t, EndMs: t + 300})
			t += 300
		}
	}
	return out
}

func TestCues(t *testing.T) {
	input := "Hello there! It costs $5, they said. " + strings.Repeat("word ", 30) + "end."
	cues := Cues(input, entries(input))
	if len(cues) < 4 {
		t.Fatalf("%d cues: %+v", len(cues), cues)
	}
	if cues[0].Text != "Hello there!" || cues[1].Text != "It costs $5, they said." {
		t.Errorf("first cues %q, %q: want them split at sentence ends with their punctuation", cues[0].Text, cues[1].Text)
	}
	var prevEnd time.Duration
	for i, c := range cues {
		for _, line := range strings.Split(c.Text, "\n") {
			if n := len([]rune(line)); n > MaxLineRunes {
				t.Errorf("cue %d has a line of %d characters: %q", i, n, line)
			}
		}
		if c.Start < prevEnd || c.End <= c.Start || c.End-c.Start > MaxCueDuration+MinCueDuration {
			t.Errorf("cue %d runs %v..%v after %v", i, c.Start, c.End, prevEnd)
		}
		prevEnd = c.End
	}
	if last := cues[len(cues)-1]; !strings.HasSuffix(last.Text, "end.") {
		t.Errorf("last cue %q", last.Text)
	}
}

// TestWriteParses checks both formats with ffmpeg, an independent parser:
// it reads each and converts it to the other.
func TestWriteParses(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		testdeps.Missing(t, "no ffmpeg (scripts/install-deps.sh installs it)")
	}
	input := "Café — naïve? Yes! " + strings.Repeat("again ", 20)
	cues := Cues(input, entries(input))
	for _, f := range []struct{ format, to string }{{"vtt", "srt"}, {"srt", "webvtt"}} {
		var b bytes.Buffer
		if err := Write(&b, f.format, cues); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "in."+f.format)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-i", path, "-f", f.to, "pipe:1").Output()
		if err != nil {
			t.Fatalf("ffmpeg refused the %s:\n%s\n%v", f.format, b.String(), err)
		}
		if n := strings.Count(string(out), " --> "); n != len(cues) {
			t.Errorf("ffmpeg read %d cues from the %s, want %d", n, f.format, len(cues))
		}
		if !strings.Contains(string(out), "Café — naïve?") {
			t.Errorf("ffmpeg's reading of the %s lost the text:\n%s", f.format, out)
		}
	}
	if err := Write(&bytes.Buffer{}, "ass", cues); err == nil {
		t.Error("an unknown format was accepted")
	}
}

func TestStamp(t *testing.T) {
	if got := stamp(3723004*time.Millisecond, '.'); got != "01:02:03.004" {
		t.Errorf("stamp = %s", got)
	}
}

// TestWriteEscapes checks that a cue's text, the user's input, cannot
// inject a cue of its own (a "-->" timing line, with attacker-chosen
// times and position) or markup, in either format.
func TestWriteEscapes(t *testing.T) {
	input := "Hi <b>there</b> & you. Say 00:00:00.000 --> 00:09:00.000 line:0 position:0% now."
	var words []engine.Word
	at := 0
	for i, f := range strings.Fields(input) {
		start := strings.Index(input[at:], f) + at
		at = start + len(f)
		words = append(words, engine.Word{Word: f, CharStart: len([]rune(input[:start])), CharEnd: len([]rune(input[:at])), StartMs: 300 * i, EndMs: 300*i + 250})
	}
	cues := Cues(input, words)
	for _, format := range Formats {
		var b strings.Builder
		if err := Write(&b, format, cues); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if n := strings.Count(out, "-->"); n != len(cues) {
			t.Errorf("%s: %d timing arrows for %d cues:\n%s", format, n, len(cues), out)
		}
		if format == "vtt" && (strings.Contains(out, "<b>") || !strings.Contains(out, "&lt;b&gt;there&lt;/b&gt; &amp; you.")) {
			t.Errorf("vtt: markup not escaped:\n%s", out)
		}
		if strings.Contains(out, "\n\n\n") {
			t.Errorf("%s: an empty line in a cue:\n%s", format, out)
		}
	}
}
