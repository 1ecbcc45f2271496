package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// workDir holds the omnistage binary the tests build.
var workDir string

func TestMain(m *testing.M) {
	if os.Getenv(goEchoStageEnv) == "1" {
		os.Exit(runGoEcho())
	}
	dir, err := os.MkdirTemp("", "omnistage-acceptance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	closeRecognizers()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var bin struct {
	once sync.Once
	path string
	err  error
}

// omnistage returns the path of the omnistage binary, built once per test
// binary (on first use, so that running only the benchmarks builds
// nothing) the way a user builds it: go build, no race detector.
func omnistage(tb testing.TB) string {
	tb.Helper()
	bin.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		path := filepath.Join(workDir, "omnistage")
		cmd := exec.Command(goTool, "build", "-o", path, "github.com/omnistage/omnistage/cmd/omnistage")
		out, err := cmd.CombinedOutput()
		if err != nil {
			bin.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		bin.path = path
	})
	if bin.err != nil {
		tb.Fatal(bin.err)
	}
	return bin.path
}

// result is what one `omnistage say` run produced.
type result struct {
	audio  *engine.Audio // nil when it failed
	words  []engine.Word // with --timestamps
	stderr string
	code   int
}

func (r result) seconds() float64 { return seconds(r.audio) }

func seconds(a *engine.Audio) float64 { return float64(len(a.Samples)) / float64(a.SampleRate) }

// sayTimeout bounds one run; the longest paragraph takes well under a
// second.
const sayTimeout = time.Minute

// say runs `omnistage say -o OUT args...` with stdin and returns what it
// wrote: the WAV file, and the timestamps JSON when args hold
// --timestamps.
func say(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.wav")
	ctx, cancel := context.WithTimeout(context.Background(), sayTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, omnistage(t), append([]string{"say", "-o", out}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
		return r
	case err != nil:
		t.Fatalf("omnistage say %q: %v", args, err)
	}
	r.audio = readWAV(t, out)
	for _, a := range args {
		if a == "--timestamps" {
			if err := json.Unmarshal(stdout.Bytes(), &r.words); err != nil {
				t.Fatalf("omnistage say %q: timestamps: %v\n%s", args, err, stdout.Bytes())
			}
		}
	}
	return r
}

func readWAV(t *testing.T, path string) *engine.Audio {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := audio.ReadWAV(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return a
}

// fliteCLI runs the flite command-line program on text with a voice and
// returns its audio: the reference a user would compare with. With
// fromFile the text goes through a file (flite -f), which flite reads a
// sentence at a time; otherwise it is one argument (flite -t), which
// flite speaks as one utterance.
func fliteCLI(t *testing.T, voice, text string, fromFile bool) *engine.Audio {
	t.Helper()
	path, err := exec.LookPath("flite")
	if err != nil {
		testdeps.Missing(t, "the flite command is not installed: run scripts/install-deps.sh --test (Debian package flite)")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "flite.wav")
	args := []string{"-voice", voice, "-t", text, "-o", out}
	if fromFile {
		in := filepath.Join(dir, "text.txt")
		if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args[2], args[3] = "-f", in
	}
	if b, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Fatalf("flite %q: %v\n%s", args, err, b)
	}
	return readWAV(t, out)
}

// spoken returns the words flite speaks for text, normalized as
// flite.Analyze normalizes them, with their phones.
func spoken(t *testing.T, text, voice string) []flite.WordPron {
	t.Helper()
	prons, err := flite.Analyze(text, voice)
	if err != nil {
		t.Fatal(err)
	}
	return prons
}

// names returns the words' names.
func names(prons []flite.WordPron) []string {
	out := make([]string, len(prons))
	for i, p := range prons {
		out[i] = p.Word
	}
	return out
}

// said returns the words a listener can hear, in comparable form (see
// refWords): a "word" without phones, such as a punctuation mark flite
// kept as a token of its own, makes no sound.
func said(prons []flite.WordPron) []string {
	var out []string
	for _, p := range prons {
		if len(p.Phones) > 0 {
			out = append(out, p.Word)
		}
	}
	return refWords(out)
}

// recognizers holds the shared recognizers: one per CPU, at most two
// (each holds about 100 MB). A nil entry is one not made yet.
var recognizers = func() chan *sphinx.Recognizer {
	n := min(runtime.NumCPU(), 2)
	c := make(chan *sphinx.Recognizer, n)
	for range n {
		c <- nil
	}
	return c
}()

// recognize decodes a with a free recognizer and returns what it heard.
func recognize(tb testing.TB, a *engine.Audio) string {
	tb.Helper()
	r := <-recognizers
	defer func() { recognizers <- r }()
	if r == nil {
		var err error
		if r, err = sphinx.NewRecognizer("", "", ""); err != nil {
			tb.Fatal(err)
		}
	}
	hyp, err := r.Recognize(context.Background(), a)
	if err != nil {
		tb.Fatal(err)
	}
	return hyp
}

func closeRecognizers() {
	for range cap(recognizers) {
		if r := <-recognizers; r != nil {
			r.Close()
		}
	}
}

// kal16Pipeline is a pipeline for the diphone voice kal16: its talker
// makes segments, not frames.
const kal16Pipeline = `
pipeline:
  name: tts-kal16
  input: text
  stages:
    - {id: 0, name: talker,  engine: flite-talker,  input: text,     output: segments}
    - {id: 1, name: vocoder, engine: flite-vocoder, input: segments, output: audio, final_output: true}
  aligner: {engine: sphinx-aligner}
deploy:
  stages:
    - {id: 0, options: {voice: kal16}}
`

// kal16Config writes kal16Pipeline to a file and returns its path.
func kal16Config(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kal16.yaml")
	if err := os.WriteFile(path, []byte(kal16Pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
