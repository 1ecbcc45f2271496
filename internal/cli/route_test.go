package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/builtin"
	"github.com/omnistage/omnistage/internal/engines/testengine"
)

// runCLI runs the command line with the shipped engines and the test
// engines the test configurations name.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Engines: withTestEngines}, args)
	return out.String(), errb.String(), code
}

func withTestEngines(r *engine.Registry) {
	builtin.Register(r)
	testengine.Register(r, nil, "test-talker", "test-post", "test-vocoder", "test-a", "test-b")
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const reorderConfig = `pipeline:
  name: reo
  input: text
  stages:
    - {id: 0, name: talker, engine: test-talker, input: text, output: frames}
    - {id: 1, name: post, engine: test-post, input: audio, output: audio, final_output: true}
    - {id: 2, name: vocoder, engine: test-vocoder, input: frames, output: audio, final_output: true}
  stage_transitions: [[0, 2], [2, 1]]
  aligner: {engine: sphinx-aligner}
`

func TestRouteDefault(t *testing.T) {
	out, errs, code := runCLI(t, "route")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"pipeline: tts", "route: 0 -> 1\n", "skipped: none", "aligner: 2 (sphinx-aligner) after stage 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRouteJSON(t *testing.T) {
	out, errs, code := runCLI(t, "route", "--config", writeConfig(t, reorderConfig), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got RouteJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := `{"pipeline":"reo","route":[0,2,1],"skipped":[],"aligner":3,"stages":[` +
		`{"id":0,"name":"talker","engine":"test-talker","upstream":null,"downstream":2},` +
		`{"id":1,"name":"post","engine":"test-post","upstream":2,"downstream":3},` +
		`{"id":2,"name":"vocoder","engine":"test-vocoder","upstream":0,"downstream":1},` +
		`{"id":3,"name":"aligner","engine":"sphinx-aligner","upstream":1,"downstream":null}]}`
	compact, _ := json.Marshal(got)
	if string(compact) != want {
		t.Errorf("json =\n%s\nwant\n%s", compact, want)
	}
}

func TestRouteInvalid(t *testing.T) {
	bad := strings.Replace(reorderConfig, "[[0, 2], [2, 1]]", "[[0, 2], [2, 1], [1, 0], [0, true]]", 1)
	path := writeConfig(t, bad)
	out, errs, code := runCLI(t, "route", "--config", path)
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) < 2 {
		t.Fatalf("want every reason on its own line, got:\n%s", errs)
	}
	for _, want := range []string{"stage_transitions[3][1]: must be an integer, got boolean true", "cycle 0 -> 2 -> 1 -> 0"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, path+":") {
			t.Errorf("line does not name the file: %q", l)
		}
	}
}

// TestRouteUnknownEngine checks engine names against the engines this
// program has: an unknown one is an error naming its line and the known
// ones.
func TestRouteUnknownEngine(t *testing.T) {
	path := writeConfig(t, strings.Replace(reorderConfig, "engine: test-post", "engine: espeak", 1))
	out, errs, code := runCLI(t, "route", "--config", path)
	want := path + `:6: pipeline.stages[1].engine: unknown engine "espeak" (engines: audio-enhance, flite-talker, flite-vocoder, sphinx-aligner, test-a, `
	if code != 2 || out != "" || !strings.HasPrefix(errs, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errs, want)
	}
}

func TestUsage(t *testing.T) {
	if _, errs, code := runCLI(t); code != 2 || !strings.Contains(errs, "usage: omnistage") {
		t.Errorf("no args: exit %d, %q", code, errs)
	}
	if _, errs, code := runCLI(t, "frobnicate"); code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", code, errs)
	}
	if _, _, code := runCLI(t, "route", "-h"); code != 0 {
		t.Errorf("route -h: exit %d", code)
	}
	if _, errs, code := runCLI(t, "route", "--nope"); code != 2 || !strings.Contains(errs, "flag provided but not defined") {
		t.Errorf("bad flag: exit %d, %q", code, errs)
	}
	if _, errs, code := runCLI(t, "route", "--config", "/does/not/exist.yaml"); code != 2 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing file: exit %d, %q", code, errs)
	}
}
