package acceptance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/testdeps"
)

// TestOpenAINodeSDK drives the server with the official OpenAI Node SDK,
// unchanged (test/openai-node, installed by scripts/install-deps.sh):
// audio.speech.create with no response_format gives mp3 that ffmpeg plays,
// every format comes with its content type, and voices work as names and
// as objects.
func TestOpenAINodeSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server with the real engines")
	}
	dir, _ := filepath.Abs("../../test/openai-node")
	if _, err := exec.LookPath("node"); err != nil {
		testdeps.Missing(t, "no node (scripts/install-deps.sh installs nodejs)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testdeps.Missing(t, "the OpenAI SDK is not installed: run scripts/install-deps.sh (npm ci in test/openai-node)")
	}
	for _, tool := range []string{"ffprobe", "ffmpeg"} {
		if _, err := exec.LookPath(tool); err != nil {
			testdeps.Missing(t, "no %s (scripts/install-deps.sh installs ffmpeg)", tool)
		}
	}
	front := serve(t)
	out := t.TempDir()
	cmd := exec.Command("node", "check.mjs", front.url, out)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.mjs: %v\n%s\nserver:\n%s", err, stderr.String(), front.out)
	}
	codec := map[string]string{"mp3": "mp3", "opus": "opus", "aac": "aac", "flac": "flac", "wav": "pcm_s16le"}
	contentType := map[string]string{"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}
	n := 0
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r struct{ Name, File, ContentType string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		n++
		format := strings.TrimPrefix(filepath.Ext(r.File), ".")
		if r.ContentType != contentType[format] {
			t.Errorf("%s: Content-Type %q, want %q", r.Name, r.ContentType, contentType[format])
		}
		if format == "pcm" {
			if fi, err := os.Stat(r.File); err != nil || fi.Size() < 16000 || fi.Size()%2 != 0 {
				t.Errorf("%s: pcm of %v bytes (%v)", r.Name, fi.Size(), err)
			}
			continue
		}
		probe, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "stream=codec_name:format=duration", "-of", "default=nw=1:nk=1", r.File).Output()
		lines := strings.Fields(string(probe))
		var seconds float64
		if len(lines) == 2 {
			seconds, _ = strconv.ParseFloat(lines[1], 64)
		}
		if err != nil || len(lines) != 2 || lines[0] != codec[format] || seconds < 0.5 {
			t.Errorf("%s: ffprobe says %q (%v), want %s of at least 0.5 s", r.Name, probe, err, codec[format])
		}
	}
	if n != 8 {
		t.Errorf("%d cases ran, want 8:\n%s", n, stderr.String())
	}
}
