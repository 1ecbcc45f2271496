package stagecheck

// The battery on every stage program the repository ships, as
// `omnistage stage check` runs it (go test, so CI runs it): each example
// passes, and each program of examples/broken fails the case its README
// names.

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/external"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// fakeModels holds the test doubles of the Python model packages that
// cannot be installed here (piper, kokoro): put on PYTHONPATH, they let
// the battery run those examples' glue.
const fakeModels = "examples/testdata/fakemodels"

// notPrograms are the Python files under examples/ that are modules of a
// program, not stage programs.
var notPrograms = []string{"examples/espeak/voices.py", "examples/onnx-line/png.py"}

// example is a stage program and what the battery says of it (as expect
// reads want).
type example struct {
	program string            // from the repository's root
	env     map[string]string // beyond PATH; paths from the root are made absolute
	needs   string            // a tool it runs, beyond python3
	files   []string          // files it reads (models), absolute
	input   *Input            // nil: the battery's typical input
	want    map[string]string
}

// examples lists every stage program under examples/ and the Python SDK's
// own example stages.
func examples(t *testing.T) []example {
	// espeak-ng's phonemes of the battery's sentence: synth.py's input.
	phonemes, err := NewInput("phonemes", []byte("D@2 kw'Ik br'aUn f'0ks dZ'Vmps ,oUv3 D@2 l'eIzi d'0g"))
	if err != nil {
		t.Fatal(err)
	}
	sdk := map[string]string{"PYTHONPATH": "sdk/python"}
	// Scores of PP-OCRv4's recognizer for 4 steps: decode.py's input.
	const classes = 6625
	scores := make([]float32, 4*classes)
	for t, class := range []int{40, 40, 0, 41} {
		scores[t*classes+class] = 1
	}
	probs := &Input{Kind: engine.KindTensor, Prompt: "", Chunks: []engine.Chunk{{Tensors: &engine.Tensors{Tensors: []engine.Tensor{
		engine.Float32Tensor("probs", []int64{1, 4, classes}, scores)}}}}}
	noParams := map[string]string{"unknown-param": "skip", "check-param": "skip", "bad-params": "skip"}
	return []example{
		{program: "examples/echo-raw/echo.py", want: map[string]string{"hello": "pass: echo takes audio, makes audio, 4 jobs at once (input window 8); params: gain"}},
		{program: "examples/espeak/phonemize.py", needs: "espeak-ng", want: map[string]string{
			"job":         "pass: 1 phonemes chunk",
			"slow-reader": "skip: the job made 1 output chunk",
		}},
		{program: "examples/espeak/synth.py", needs: "espeak-ng", input: phonemes, env: map[string]string{"VOICE": "en-us"}, want: map[string]string{
			"job":           "pass: at 22050 Hz, 1 end-of-sentence mark), then done", // its length depends on espeak-ng's version
			"cancel":        "pass: answered the cancel (sent after the first output) with cancelled",
			"unknown-param": "skip", "check-param": "skip", "bad-params": "skip",
		}},
		{program: "examples/piper/stage.py", env: map[string]string{"PYTHONPATH": fakeModels, "PIPER_MODEL": "/opt/piper/en_US-lessac-medium.onnx"}, want: map[string]string{
			"hello":      "pass: piper takes text, makes audio, 1 job at a time (input window 8); params: speed, voice; voices: en_US-lessac-medium",
			"job":        "pass: 28 audio chunks (2.64 s at 22050 Hz, 1 end-of-sentence mark)",
			"concurrent": "skip",
			"cancel":     "pass: answered the cancel (sent after the first output) with cancelled",
		}},
		{program: "examples/kokoro/stage.py", env: map[string]string{"PYTHONPATH": fakeModels, "KOKORO_VOICES": "af_heart,am_michael"}, want: map[string]string{
			"hello":      "pass: kokoro takes text, makes audio, 1 job at a time (input window 8); params: speed, voice; voices: af_heart, am_michael",
			"job":        "pass: 28 audio chunks (2.64 s at 24000 Hz, 1 end-of-sentence mark)",
			"concurrent": "skip",
			"cancel":     "pass: answered the cancel (sent after the first output) with cancelled",
		}},
		{program: "sdk/python/tests/gain.py", env: sdk, want: map[string]string{"hello": "pass: gain takes audio, makes audio, 4 jobs at once (input window 8); params: gain"}},
		{program: "sdk/python/tests/echo.py", env: sdk, want: noParams},
		{program: "sdk/python/tests/batcher.py", env: sdk, want: map[string]string{"*": "skip",
			"hello": "pass: batcher takes audio, makes audio, in batches of up to 4 jobs, 2 batches at once; params: gain",
			"warm":  "pass", "shutdown": "pass", "stdin-eof": "pass", "unknown-param": "pass", "check-param": "pass: refused",
			"batch": "pass: batches of 6 jobs in all: the 4 typical ones done, each with the output its input makes alone; a chunk of text refused: bad_input: a text chunk, but the stage takes audio; a gain of the wrong type refused: bad_params naming gain"}},
		{program: "examples/onnx-line/prep.py", want: map[string]string{
			"hello":       "pass: line-prep takes image, makes tensor, 2 jobs at once (input window 8)",
			"job":         "pass: 1 tensor chunk (1 tensors), then done",
			"slow-reader": "skip", "unknown-param": "skip", "check-param": "skip", "bad-params": "skip",
		}},
		{program: "examples/onnx-line/decode.py", input: probs, files: []string{"/usr/local/share/omnistage/models/ppocr-v4/ppocr_keys_v1.txt"}, want: map[string]string{"*": "skip",
			"hello": "pass: line-decode takes tensor, makes text, in batches of up to 16 jobs, 1 batch at a time",
			"warm":  "pass", "shutdown": "pass", "stdin-eof": "pass",
			"batch": "pass: a batch of 5 jobs: the 4 typical ones done; a chunk of text refused: bad_input",
		}},
		{program: "examples/broken/mute.py", want: map[string]string{"hello": "pass", "warm": "fail: no ready within 3s", "*": "skip"}},
		{program: "examples/broken/crash.py", want: map[string]string{
			"job":          "fail: MemoryError: the model ran out of memory",
			"concurrent":   "fail: exit status 1",
			"cancel":       "fail: exit status 1",
			"slow-reader":  "fail: it exited (exit status 1)",
			"input-credit": "fail: it exited (exit status 1)",
		}},
		{program: "examples/broken/deaf.py", want: map[string]string{"cancel": "fail: no answer to cancel within 500ms"}},
		{program: "examples/broken/garbage.py", want: map[string]string{
			"job":          `fail: header "echoing a chunk of job 1" is not a JSON object`,
			"concurrent":   "fail: is not a JSON object",
			"cancel":       "fail: print to standard error",
			"slow-reader":  "fail: it wrote a malformed message",
			"input-credit": "fail: it wrote a malformed message",
		}},
		{program: "examples/broken/overrun.py", want: map[string]string{"slow-reader": "fail: it sent 2 output chunks with credit for 1"}},
	}
}

// Every stage program the repository ships, through the battery.
func TestExamples(t *testing.T) {
	python := realPython(t)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples(t) {
		t.Run(ex.program, func(t *testing.T) {
			t.Parallel()
			if ex.needs != "" {
				if _, err := exec.LookPath(ex.needs); err != nil {
					testdeps.Missing(t, "%s needs %s: %v", ex.program, ex.needs, err)
				}
			}
			for _, f := range ex.files {
				if _, err := os.Stat(f); err != nil {
					testdeps.Missing(t, "%s needs %s: %v", ex.program, f, err)
				}
			}
			// No __pycache__ left in the tree.
			env := map[string]string{"PYTHONDONTWRITEBYTECODE": "1"}
			for k, v := range ex.env {
				if k == "PYTHONPATH" {
					v = filepath.Join(root, v)
				}
				env[k] = v
			}
			opts := Options{Command: []string{python, filepath.Join(root, ex.program)}, Env: env, Input: ex.input}
			if !strings.HasPrefix(ex.program, "examples/broken/") {
				opts.Timeout = goodTimeout
			}
			rep := batteryOf(t, opts)
			expect(t, rep, ex.want)
		})
	}
}

// realPython returns the interpreter python3 runs: a version manager's
// python3 (pyenv's) is a shell script that takes a second or more of a
// loaded machine to start it, which a battery's bounds on hello would
// count against the program.
func realPython(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		testdeps.Missing(t, "no python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestExamplesAreChecked fails when a program under examples/ is not in
// TestExamples, and when a program of examples/broken is not failed on the
// cases its README names.
func TestExamplesAreChecked(t *testing.T) {
	checked := map[string]example{}
	for _, ex := range examples(t) {
		checked[ex.program] = ex
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".py" {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := checked[rel]; !ok && !slices.Contains(notPrograms, rel) && !strings.HasPrefix(rel, "examples/testdata/") {
			t.Errorf("%s is not checked: add it to TestExamples (or, if it is a module, to notPrograms)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := brokenCases(t)
	for program, ex := range checked {
		if !strings.HasPrefix(program, "examples/broken/") {
			continue
		}
		name := filepath.Base(program)
		if len(named[name]) == 0 {
			t.Errorf("examples/broken/README.md names no failing case of %s", name)
		}
		for _, c := range named[name] {
			if !strings.HasPrefix(ex.want[c], "fail") {
				t.Errorf("examples/broken/README.md says %s fails %s; TestExamples wants %q", name, c, ex.want[c])
			}
		}
	}
}

// brokenRow is a row of examples/broken/README.md's table: | `NAME.py` |
// what it does wrong | the cases it fails, each in backquotes |.
var brokenRow = regexp.MustCompile("^\\| `([a-z]+\\.py)` \\|[^|]*\\|([^|]*)\\|$")

// brokenCases reads the failing cases examples/broken/README.md names, by
// program.
func brokenCases(t *testing.T) map[string][]string {
	text, err := os.ReadFile(filepath.Join(repoRoot, "examples", "broken", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string][]string{}
	for _, line := range strings.Split(string(text), "\n") {
		m := brokenRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		for _, c := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(m[2], -1) {
			named[m[1]] = append(named[m[1]], c[1])
		}
	}
	return named
}

// Each example pipeline loads, and its external stages run programs that
// TestExamples checks.
func TestExamplePipelines(t *testing.T) {
	checked := map[string]bool{}
	for _, ex := range examples(t) {
		checked[ex.program] = true
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*", "pipeline.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/*/pipeline.yaml (%v)", err)
	}
	for _, file := range files {
		cfg, err := pipeline.Load(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, st := range cfg.Pipeline.Stages {
			if st.Engine != external.Name {
				continue
			}
			var o external.Options
			if err := cfg.Deploy.Stages[st.ID].Options.Decode(&o); err != nil {
				t.Errorf("%s: stage %d: %v", file, st.ID, err)
				continue
			}
			if len(o.Command) < 2 || o.Command[0] != "python3" || !checked[o.Command[1]] {
				t.Errorf("%s: stage %d runs %q; want python3 and a program TestExamples checks", file, st.ID, o.Command)
			}
		}
	}
}
