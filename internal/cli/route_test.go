package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/pipeline"
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
	shipped.Register(r, nil)
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

// TestRouteDefault: without --config, route prints every built-in
// pipeline, as serve serves them all.
func TestRouteDefault(t *testing.T) {
	out, errs, code := runCLI(t, "route")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"pipeline: tts (builtin:tts)", "route: 0 -> 1\n", "skipped: none", "aligner: 2 (sphinx-aligner) after stage 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range pipeline.Builtins() {
		if !strings.Contains(out, "pipeline: "+name+" (builtin:"+name+")") {
			t.Errorf("output lacks the built-in %s:\n%s", name, out)
		}
	}
}

func TestRouteJSON(t *testing.T) {
	out, errs, code := runCLI(t, "route", "--config", writeConfig(t, reorderConfig), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got apijson.PipelineInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := `{"name":"reo","route":[0,2,1],"stages":[` +
		`{"id":0,"name":"talker","engine":"test-talker","placement":"inproc","input":"text","output":"frames","skipped":false,"upstream":null,"downstream":2},` +
		`{"id":1,"name":"post","engine":"test-post","placement":"inproc","input":"audio","output":"audio","skipped":false,"upstream":2,"downstream":3},` +
		`{"id":2,"name":"vocoder","engine":"test-vocoder","placement":"inproc","input":"frames","output":"audio","skipped":false,"upstream":0,"downstream":1}],` +
		`"aligner":{"id":3,"name":"aligner","engine":"sphinx-aligner","placement":"inproc","input":"audio","output":"timestamps","skipped":false,"upstream":1,"downstream":null},` +
		`"outputs":["audio","timestamps"]}`
	compact, _ := json.Marshal(got)
	if string(compact) != want {
		t.Errorf("json =\n%s\nwant\n%s", compact, want)
	}
	// The output is the object itself, field for field: nothing the type
	// does not know.
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(out)); err != nil || b.String() != want {
		t.Errorf("printed %s, want %s", b.Bytes(), want)
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
	reg := &engine.Registry{}
	withTestEngines(reg)
	want := path + `:6: pipeline.stages[1].engine: unknown engine "espeak" (engines: ` + strings.Join(reg.Names(), ", ") + ")"
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

// TestRouteJSONIsPipelineEndpoint checks that route --json prints the
// object GET /v1/pipeline answers for the same pipeline.
func TestRouteJSONIsPipelineEndpoint(t *testing.T) {
	url, _ := startToneServer(t, nil)
	resp, err := http.Get(url + "/v1/pipeline")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/pipeline: %d %s %v", resp.StatusCode, served, err)
	}
	var out, errb bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Engines: toneEngines(nil)}
	if code := Main(context.Background(), env, []string{"route", "--json", "--config", writeConfig(t, tonePipeline)}); code != 0 {
		t.Fatalf("route --json: exit %d: %s", code, errb.String())
	}
	var a, b bytes.Buffer
	if err := json.Compact(&a, served); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&b, out.Bytes()); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("route --json prints\n%s\nGET /v1/pipeline answers\n%s", b.String(), a.String())
	}
}
