package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stagecheck"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// python returns the interpreter the stage check tests run the examples
// with (the one python3 runs: a version manager's python3, pyenv's, is a
// shell script whose start on a loaded machine can outlast the check's
// bound on hello), or skips the test.
func python(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		testdeps.Missing(t, "no python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// example is the path of a program under examples/.
func example(name string) string { return filepath.Join("..", "..", "examples", name) }

func TestStageCheckUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"stage"}, ExitUsage, "usage: omnistage stage check"},
		{[]string{"stage", "lint"}, ExitUsage, "usage: omnistage stage check"},
		{[]string{"stage", "-h"}, ExitOK, "usage: omnistage stage check"},
		{[]string{"stage", "check", "-h"}, ExitOK, "-input-kind"},
		{[]string{"stage", "check"}, ExitUsage, "no program: give it after --"},
		{[]string{"stage", "check", "--"}, ExitUsage, "no program"},
		{[]string{"stage", "check", "python3", "stage.py"}, ExitUsage, `unexpected argument "python3": the program and its arguments go after --`},
		{[]string{"stage", "check", "--config", "[1]", "--", "x"}, ExitUsage, "--config must be a JSON object"},
		{[]string{"stage", "check", "--config", "{", "--", "x"}, ExitUsage, "--config: unexpected end of JSON input"},
		{[]string{"stage", "check", "--input-kind", "text", "--", "x"}, ExitUsage, "--input-file and --input-kind go together"},
		{[]string{"stage", "check", "--input-file", "/nonexistent/input", "--input-kind", "text", "--", "x"}, ExitUsage, "--input-file: open /nonexistent/input"},
		{[]string{"stage", "check", "--env", "NOVALUE", "--", "x"}, ExitUsage, `--env "NOVALUE": want K=V`},
		{[]string{"stage", "check", "--bogus", "--", "x"}, ExitUsage, "flag provided but not defined: -bogus"},
	} {
		out, errs, code := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errs, tc.code, tc.says)
		}
		if out != "" {
			t.Errorf("%q: stdout %q", tc.args, out)
		}
	}
	if _, errs, _ := runCLI(t); !strings.Contains(errs, "omnistage stage check [--timeout D]") {
		t.Errorf("the usage list lacks stage check:\n%s", errs)
	}
}

func TestStageCheckProgramThatDoesNotStart(t *testing.T) {
	out, _, code := runCLI(t, "stage", "check", "--timeout", "2s", "--", filepath.Join(t.TempDir(), "nonexistent"))
	if code != ExitFailure {
		t.Errorf("exit %d; want %d", code, ExitFailure)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(stagecheck.CaseNames())+1 || !strings.HasPrefix(lines[0], "FAIL hello: it did not start: ") ||
		lines[1] != "SKIP warm: no valid hello (see hello)" || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("0 passed, 1 failed (hello), 0 warned, %d skipped in ", len(stagecheck.CaseNames())-1)) {
		t.Errorf("output:\n%s", out)
	}
}

func TestStageCheckEcho(t *testing.T) {
	py := python(t)
	out, errs, code := runCLI(t, "stage", "check", "--timeout", "5s", "--", py, example("echo-raw/echo.py"))
	if code != ExitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	names := stagecheck.CaseNames()
	if len(lines) != len(names)+1 {
		t.Fatalf("%d lines; want one per case and a summary:\n%s", len(lines), out)
	}
	for i, name := range names {
		want := "PASS " + name + ": "
		if name == "batch" {
			want = "SKIP batch: hello has no max_batch" // a program of jobs
		}
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: %q; want %s", i+1, lines[i], want)
		}
	}
	if want := "PASS hello: echo takes audio, makes audio, 4 jobs at once (input window 8); params: gain"; lines[0] != want {
		t.Errorf("hello: %q; want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[len(names)], fmt.Sprintf("%d passed, 0 failed, 0 warned, 1 skipped in ", len(names)-1)) {
		t.Errorf("summary %q", lines[len(names)])
	}
}

func TestStageCheckBrokenJSON(t *testing.T) {
	py := python(t)
	out, errs, code := runCLI(t, "stage", "check", "--json", "--timeout", "5s", "--", py, example("broken/overrun.py"))
	if code != ExitFailure {
		t.Fatalf("exit %d; want %d; stderr:\n%s", code, ExitFailure, errs)
	}
	var rep stagecheck.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.OK || rep.Stage == nil || rep.Stage.Name != "echo" || rep.Summary.Failed != 1 {
		t.Errorf("report %+v", rep)
	}
	if c := rep.Case("slow-reader"); c == nil || c.Status != stagecheck.Fail || !strings.Contains(c.Detail, "output beyond its credit") {
		t.Errorf("slow-reader: %+v", c)
	}
}

func TestStageCheckInputFile(t *testing.T) {
	py := python(t)
	var wav bytes.Buffer
	if err := audio.WriteWAV(&wav, &engine.Audio{SampleRate: 22050, Samples: make([]int16, 4410)}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.wav")
	if err := os.WriteFile(path, wav.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runCLI(t, "stage", "check", "--input-file", path, "--input-kind", "audio", "--", py, example("echo-raw/echo.py"))
	if code != ExitOK || !strings.Contains(out, "PASS job: 3 audio chunks (0.20 s at 22050 Hz, 1 end-of-sentence mark)") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	// An input of a kind the stage does not take fails its job case.
	text := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(text, []byte("Hello."), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, "stage", "check", "--input-file", text, "--input-kind", "text", "--", py, example("echo-raw/echo.py"))
	if code != ExitFailure || !strings.Contains(out, "FAIL job: the input given is text, but the stage takes audio") ||
		!strings.Contains(out, "SKIP concurrent: no input (see job)") {
		t.Errorf("exit %d; stdout:\n%s", code, out)
	}
}
