package api

// The README's Python client of the speech stream, run as written against
// the built-in pipeline.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// TestReadmePythonStream runs the README's Python snippet (its section
// Live input) against a server of the built-in pipeline, with the first
// python3 that has the websockets package (else it skips): it prints each
// sentence as its audio begins, and live.wav holds the audio of its text
// spoken whole.
func TestReadmePythonStream(t *testing.T) {
	python := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import websockets").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		testdeps.Missing(t, "no python3 with the websockets package (pip install websockets, or apt-get install python3-websockets)")
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Live input (WebSocket)\n")
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)```python\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("README.md's section Live input (WebSocket) has no python block")
	}
	text := regexp.MustCompile(`TEXT = "(.*)"`).FindStringSubmatch(m[1])
	if text == nil {
		t.Fatal("the snippet has no TEXT")
	}
	f := realFixture(t, "builtin:tts", "")
	script := strings.Replace(m[1], "127.0.0.1:8080", strings.TrimPrefix(f.url, "http://"), 1)
	dir := t.TempDir()
	cmd := exec.Command(python, "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the snippet: %v\n%s", err, out)
	}
	if want := "speaking: Hello there.\nspeaking: The first sentence plays while this one is still being written.\n"; string(out) != want {
		t.Errorf("the snippet printed %q, want %q", out, want)
	}
	wav, err := os.ReadFile(filepath.Join(dir, "live.wav"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ReadWAV(bytes.NewReader(wav))
	if err != nil {
		t.Fatalf("live.wav: %v", err)
	}
	if whole := wholePCM(t, f, text[1]); a.SampleRate != 16000 || !bytes.Equal(audio.AppendPCMBytes(nil, a.Samples), whole) {
		t.Errorf("live.wav: %d samples at %d Hz; the text spoken whole is %d samples", len(a.Samples), a.SampleRate, len(whole)/2)
	}
}
