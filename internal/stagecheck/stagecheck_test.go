package stagecheck

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/testdeps"
	"github.com/omnistage/omnistage/internal/testkit"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(testStageEnv); mode != "" {
		os.Exit(runTestStage(mode))
	}
	goleak.VerifyTestMain(m)
}

// Bounds of the tests' batteries: a broken stage costs some of each.
// goodTimeout is the wait bound of programs that pass: generous, since a
// Python program's start on a loaded machine can take seconds, and a
// program that answers never waits it out.
const (
	testTimeout       = 3 * time.Second
	testCancelTimeout = 500 * time.Millisecond
	testStopTimeout   = time.Second
	goodTimeout       = 30 * time.Second
)

// battery runs the battery on command, with env.
func battery(t *testing.T, command []string, env map[string]string) Report {
	t.Helper()
	return batteryOf(t, Options{Command: command, Env: env})
}

// batteryOf runs the battery with opts under the tests' bounds (a wait
// bound opts sets is kept).
func batteryOf(t *testing.T, opts Options) Report {
	t.Helper()
	stderr := &testkit.SyncBuffer{}
	opts.Stderr = stderr
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	opts.CancelTimeout, opts.StopTimeout = testCancelTimeout, testStopTimeout
	rep := Run(context.Background(), opts)
	if len(rep.Cases) != len(cases) {
		t.Fatalf("%d results; want one per case (%d)", len(rep.Cases), len(cases))
	}
	if t.Failed() {
		t.Logf("the programs' stderr:\n%s", stderr)
	}
	return rep
}

// expect checks a report against want: case name to "status" or "status:
// what its detail or stderr says"; the key "*" gives the status of the
// cases want does not name (pass when it is not there, but skip for the
// batch case of a stage that takes jobs).
func expect(t *testing.T, rep Report, want map[string]string) {
	t.Helper()
	others := Pass
	if s, ok := want["*"]; ok {
		others = Status(s)
	}
	for _, r := range rep.Cases {
		status, says := others, ""
		if _, ok := want["*"]; !ok && r.Name == "batch" && rep.Stage != nil && rep.Stage.MaxBatch == 0 {
			status = Skip
		}
		if w, ok := want[r.Name]; ok {
			s, rest, _ := strings.Cut(w, ": ")
			status, says = Status(s), rest
		}
		text := r.Detail + "\n" + strings.Join(r.Stderr, "\n")
		if r.Status != status || !strings.Contains(text, says) {
			t.Errorf("%s: %s: %s (stderr %q); want %s saying %q", r.Name, r.Status, r.Detail, r.Stderr, status, says)
		}
	}
	if wantOK := !strings.Contains(strings.Join(mapValues(want), " "), "fail"); rep.OK != wantOK {
		t.Errorf("report OK %v; want %v", rep.OK, wantOK)
	}
}

func mapValues(m map[string]string) []string {
	var vs []string
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

// testCommand is the command of the Go test stage: this test binary.
func testCommand() []string { return []string{os.Args[0], "-test.run=^$"} }

// testStageEnviron is the environment of the Go test stage in mode. Built
// with -race, it would wait a second at exit for the race detector's
// reports, which would count against the stop timeouts.
func testStageEnviron(mode string) map[string]string {
	return map[string]string{testStageEnv: mode, "GORACE": "atexit_sleep_ms=0"}
}

// The Go test stage's modes, and what the battery says of each.
func TestGoStages(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want map[string]string
	}{
		{"echo", map[string]string{"hello": "pass: test-echo takes audio, makes audio, 2 jobs at once (input window 8); params: gain; voices: v1",
			"batch": "skip: hello has no max_batch"}},
		{"batch", map[string]string{"*": "skip", "job": "skip: the stage takes batches (max_batch 3): the runtime sends it no job (see batch)",
			"hello": "pass: test-batch takes audio, makes audio, in batches of up to 3 jobs, 2 batches at once; params: gain; voices: v1",
			"warm":  "pass", "shutdown": "pass", "stdin-eof": "pass", "unknown-param": "pass", "check-param": "pass",
			"batch": "pass: batches of 5 jobs in all: the 3 typical ones done, each with the output its input makes alone; a chunk of text refused: bad_input: want audio, got text; a gain of the wrong type refused: bad_params naming gain"}},
		{"batchlax", map[string]string{"*": "skip", "hello": "pass", "warm": "pass", "shutdown": "pass", "stdin-eof": "pass", "unknown-param": "pass", "check-param": "pass",
			"batch": "warn: it took a chunk of text and said done"}},
		{"batchmix", map[string]string{"*": "skip", "hello": "pass", "warm": "pass", "shutdown": "pass", "stdin-eof": "pass", "unknown-param": "pass", "check-param": "pass",
			"batch": "fail: job 1 of batches of 5 jobs in all made 1 audio chunk"}},
		{"text", map[string]string{"job": "pass: 2 audio chunks", "bad-input": "pass: refused a chunk of audio (it takes text): bad_input"}},
		{"lax", map[string]string{"bad-input": "warn: took a chunk of text (it takes audio) and said done"}},
		{"serial", map[string]string{"concurrent": "skip: max_jobs is 1"}},
		{"anyparams", map[string]string{"check-param": `pass: accepted {"gain":"not a number"}`, "bad-params": "warn: the stage takes any value of gain"}},
		{"crash", map[string]string{
			"job":          "fail: it exited (exit status 3)",
			"concurrent":   "fail: input 1 alone: it exited (exit status 3)",
			"cancel":       "fail: about to crash",
			"slow-reader":  "fail: it exited (exit status 3)",
			"input-credit": "fail: it exited (exit status 3)",
		}},
		{"stall", map[string]string{
			"job":          "fail: no message within 3s after 1 output chunk (8 of 11 input chunks sent), with credit for 8 more output chunks",
			"concurrent":   "fail: input 1 alone: no message within 3s",
			"slow-reader":  "fail: no message within 3s after 1 output chunk (8 of 11 input chunks sent), with credit for 1 more output chunk",
			"input-credit": "fail: took 8 input chunks (its window is 8) and gave no credit back within 3s",
			"cancel":       "fail: answered the cancel (sent after the first output) with cancelled in",
		}},
		{"deaf", map[string]string{
			"job":          "fail: no message within 3s",
			"concurrent":   "fail: no message within 3s",
			"cancel":       "fail: no answer to cancel within 500ms",
			"slow-reader":  "fail: no message within 3s",
			"input-credit": "fail: gave no credit back within 3s",
		}},
		{"fail", map[string]string{
			"job":          "fail: the job failed: failed: the model ran out of road",
			"concurrent":   "fail: the model ran out of road",
			"cancel":       "fail: the model ran out of road",
			"slow-reader":  "fail: the job failed: failed: the model ran out of road",
			"input-credit": "fail: the job failed: failed: the model ran out of road",
		}},
		{"silent", map[string]string{"hello": "fail: no hello within 3s", "*": "skip"}},
		{"refuse", map[string]string{"hello": "pass", "warm": "fail: it refused to warm up: no model here", "*": "skip"}},
		{"badexit", map[string]string{"shutdown": "fail: exit status 1", "stdin-eof": "fail: exiting badly"}},
		{"badhello", map[string]string{"hello": `fail: its hello: protocol 2: this runtime speaks 1; voice "v1": no name`, "*": "skip"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			rep := battery(t, testCommand(), testStageEnviron(tc.mode))
			expect(t, rep, tc.want)
		})
	}
}

func TestNoProgram(t *testing.T) {
	rep := battery(t, []string{filepath.Join(t.TempDir(), "nonexistent")}, nil)
	expect(t, rep, map[string]string{"hello": "fail: it did not start", "*": "skip"})
	if rep.Stage != nil {
		t.Errorf("stage %+v of a program that did not start", rep.Stage)
	}
}

// TestMissingModule checks that a program that dies on an import is
// reported with what to do: its environment is clean, and --env gives it
// variables.
func TestMissingModule(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testdeps.Missing(t, "no python3")
	}
	rep := battery(t, []string{"python3", "-c", "import omnistage_no_such_module"}, nil)
	expect(t, rep, map[string]string{"hello": "fail: No module named 'omnistage_no_such_module'", "*": "skip"})
	if d := rep.Case("hello").Detail; !strings.Contains(d, "the program's environment is clean (PATH and --env K=V only") || !strings.Contains(d, "(PYTHONPATH) with --env K=V") {
		t.Errorf("hello: %q; want the hint of a clean environment", d)
	}
}

func TestNoCommand(t *testing.T) {
	expect(t, Run(context.Background(), Options{}), map[string]string{"hello": "fail: no program to run", "*": "skip"})
}

func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := Run(ctx, Options{Command: testCommand(), Env: testStageEnviron("echo")})
	if !rep.Interrupted || rep.OK || rep.Summary.Skipped != len(cases) {
		t.Errorf("a battery run with its context done: %+v", rep)
	}
}

func TestReportJSON(t *testing.T) {
	rep := Report{Command: []string{"stage"}, Cases: []Result{{Name: "hello", Status: Pass, Detail: "fine"}, {Name: "warm", Status: Fail, Detail: "no ready within 1s", Stderr: []string{"oops"}}}}
	rep.finish(1500 * time.Millisecond)
	if got, want := rep.SummaryLine(), "1 passed, 1 failed (warm), 0 warned, 0 skipped in 1.5s"; got != want {
		t.Errorf("summary %q; want %q", got, want)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"command":["stage"],"stage":null,"cases":[{"name":"hello","status":"pass","detail":"fine","seconds":0},` +
		`{"name":"warm","status":"fail","detail":"no ready within 1s","stderr":["oops"],"seconds":0}],` +
		`"interrupted":false,"seconds":1.5,"summary":{"passed":1,"failed":1,"warned":0,"skipped":0},"ok":false}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	var text strings.Builder
	rep.Cases[1].WriteText(&text)
	if got, want := text.String(), "FAIL warm: no ready within 1s\n     stderr: oops\n"; got != want {
		t.Errorf("text %q; want %q", got, want)
	}
}
