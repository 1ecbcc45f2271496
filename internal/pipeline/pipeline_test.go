package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// eachTestdata runs fn, as a subtest named after the file, on each file
// that matches pattern; no file is a failure.
func eachTestdata(t *testing.T, pattern string, fn func(t *testing.T, file string, data []byte)) {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fn(t, f, data)
		})
	}
}

// expectations reads the "# key: value" lines at the top of a testdata file.
func expectations(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	want := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "# ")
		if !ok {
			break
		}
		k, v, _ := strings.Cut(rest, ":")
		want[k] = append(want[k], strings.TrimSpace(v))
	}
	return want
}

func idList(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func TestGoodConfigs(t *testing.T) {
	eachTestdata(t, "testdata/*.good.yaml", func(t *testing.T, f string, data []byte) {
		want := expectations(t, data)
		c, err := Parse(data, f)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		r := c.Route
		if got := joinArrow(r.Order()); got != want["route"][0] {
			t.Errorf("route = %q, want %q", got, want["route"][0])
		}
		if got := idList(r.Skipped()); got != strings.ReplaceAll(want["skipped"][0], " ", "") {
			t.Errorf("skipped = %q, want %q", got, want["skipped"][0])
		}
		gotAligner := "none"
		if id, ok := r.Aligner(); ok {
			gotAligner = fmt.Sprint(id)
		}
		if gotAligner != want["aligner"][0] {
			t.Errorf("aligner = %s, want %s", gotAligner, want["aligner"][0])
		}
		gotTr := "omitted"
		if tr := r.Transitions(); tr != nil {
			var parts []string
			for _, e := range tr {
				parts = append(parts, fmt.Sprintf("[%d,%d]", e[0], e[1]))
			}
			gotTr = strings.Join(parts, " ")
		}
		if gotTr != want["transitions"][0] {
			t.Errorf("transitions = %s, want %s", gotTr, want["transitions"][0])
		}
		checkRouteInvariants(t, c)
	})
}

func joinArrow(ids []int) string { return chainString(ids) }

func TestBadConfigs(t *testing.T) {
	eachTestdata(t, "testdata/*.bad.yaml", func(t *testing.T, f string, data []byte) {
		want := expectations(t, data)["error"]
		c, err := Parse(data, f)
		if err == nil {
			// Engine names are checked against the registry of the
			// program that runs the pipeline, after parsing.
			err = c.CheckEngines(testEngines{})
		}
		if err == nil {
			t.Fatalf("Parse and CheckEngines succeeded with route %v, want errors %q", c.Route, want)
		}
		var errs Errors
		if !errors.As(err, &errs) {
			t.Fatalf("error is %T, want Errors", err)
		}
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
			if e.File != f {
				t.Errorf("error %q does not name the file", e)
			}
		}
		used := make([]bool, len(got))
	next:
		for _, w := range want {
			for i, g := range got {
				if !used[i] && strings.Contains(g, w) {
					used[i] = true
					continue next
				}
			}
			t.Errorf("no error contains %q", w)
		}
		for i, g := range got {
			if !used[i] {
				t.Errorf("unexpected error %q", g)
			}
		}
	})
}

// testEngines stands in for a program's engine registry: the built-in
// engines and the test engines the testdata names. Engine external
// and test-bounded take timeout and warm_timeout at any placement;
// test-batcher batches (max_batch, max_batch_delay); the flite engines
// replay (migrate).
type testEngines struct{}

var knownEngines = []string{"audio-enhance", "external", "flite-talker", "flite-vocoder", "ppocr-cls", "ppocr-det", "ppocr-rec", "sphinx-aligner", "test-*"}

func (testEngines) Lookup(name string) (engine.Driver, bool) {
	if !slices.Contains(knownEngines, name) && !strings.HasPrefix(name, "test-") {
		return engine.Driver{}, false
	}
	var d engine.Driver
	switch name {
	case "external", "test-bounded":
		d.DeployKeys = []string{"timeout", "warm_timeout"}
	case "test-batcher", "ppocr-cls", "ppocr-rec":
		d.DeployKeys = []string{"max_batch", "max_batch_delay"}
	case "flite-talker", "flite-vocoder":
		d.DeployKeys = []string{"migrate"}
	}
	return d, true
}

func (testEngines) Names() []string { return knownEngines }

func TestGoodConfigsUseKnownEngines(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	for _, f := range files {
		c := mustParse(t, filepath.Base(f))
		if err := c.CheckEngines(testEngines{}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, name := range Builtins() {
		c, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckEngines(testEngines{}); err != nil {
			t.Errorf("builtin %s: %v", name, err)
		}
	}
}

func TestBuiltins(t *testing.T) {
	names := Builtins()
	if len(names) < 2 {
		t.Fatalf("builtins = %v, want at least tts and one more", names)
	}
	skipOrReorder := false
	for _, name := range names {
		c, err := Builtin(name)
		if err != nil {
			t.Fatalf("builtin %s: %v", name, err)
		}
		checkRouteInvariants(t, c)
		if len(c.Route.Skipped()) > 0 || !isSorted(c.Route.Order()) {
			skipOrReorder = true
		}
	}
	if !skipOrReorder {
		t.Error("no built-in uses a skip or reorder route")
	}
	c, err := Builtin(DefaultBuiltin)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Route.String(); got != "0 -> 1 -> 2" {
		t.Errorf("tts chain = %s", got)
	}
	if _, err := Builtin("nope"); err == nil || !strings.Contains(err.Error(), "built-ins: ") {
		t.Errorf("unknown builtin error = %v", err)
	}
}

func isSorted(ids []int) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] < ids[i-1] {
			return false
		}
	}
	return true
}

func TestDefaults(t *testing.T) {
	c, err := Builtin("tts-raw")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Deploy
	if d.MaxInflight != DefaultMaxInflight || d.StreamBuffer != DefaultStreamBuffer || d.AbortTimeout != DefaultAbortTimeout {
		t.Errorf("deploy defaults = %+v", d)
	}
	if len(d.Stages) != 4 {
		t.Fatalf("deploy stages = %d, want one per stage id and the aligner", len(d.Stages))
	}
	for id, s := range d.Stages {
		inflight := 64 // the file's, for the talker, the vocoder and the aligner
		if id == 2 {
			inflight = DefaultStageMaxInflight // enhance, off the route
		}
		if s.ID != id || s.Replicas != 1 || s.Placement != PlacementInproc || s.MaxQueue != DefaultStageMaxQueue || s.MaxInflight != inflight {
			t.Errorf("stage %d deploy = %+v", id, s)
		}
	}
	if d.Stages[0].Options["voice"] != "slt" {
		t.Errorf("options = %v", d.Stages[0].Options)
	}
}

func TestPeers(t *testing.T) {
	c := mustParse(t, "reorder.good.yaml")
	r := c.Route
	cases := []struct {
		id       int
		up, down int
	}{{0, -1, 2}, {2, 0, 1}, {1, 2, 3}, {3, 1, -1}}
	for _, tc := range cases {
		up, _ := r.Upstream(tc.id)
		down, _ := r.Downstream(tc.id)
		if up != tc.up || down != tc.down {
			t.Errorf("stage %d peers = (%d, %d), want (%d, %d)", tc.id, up, down, tc.up, tc.down)
		}
	}
	c = mustParse(t, "skip.good.yaml")
	if up, ok := c.Route.Upstream(2); ok {
		t.Errorf("skipped stage 2 has upstream %d", up)
	}
	if down, ok := c.Route.Downstream(2); ok {
		t.Errorf("skipped stage 2 has downstream %d", down)
	}
	if got := fmt.Sprint(c.Route.Prefix(1)); got != "[0 1]" {
		t.Errorf("prefix(1) = %s", got)
	}
	if got := c.Route.Prefix(2); got != nil {
		t.Errorf("prefix of a skipped stage = %v, want nil", got)
	}
}

func mustParse(t *testing.T, name string) *Config {
	t.Helper()
	c, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSelect(t *testing.T) {
	cases := []struct {
		file       string
		modalities []string
		final      int
		stages     string
		outputs    string
		need       int
		err        string
	}{
		{file: "sequential.good.yaml", final: 2, stages: "0,1,2", outputs: "2:audio", need: 3},
		{file: "sequential.good.yaml", modalities: []string{"audio"}, final: 2, stages: "0,1,2", outputs: "2:audio", need: 3},
		{file: "sequential.good.yaml", modalities: []string{"audio", "timestamps"}, final: 3, stages: "0,1,2,3", outputs: "2:audio 3:timestamps", need: 4},
		{file: "sequential.good.yaml", modalities: []string{"timestamps"}, final: 3, stages: "0,1,2,3", outputs: "3:timestamps", need: 4},
		{file: "sequential.good.yaml", modalities: []string{"timestamps", "audio", "audio"}, err: `output_modalities[2]: "audio" is already output_modalities[1]`},
		{file: "sequential-noaligner.good.yaml", modalities: []string{"timestamps"}, err: `no stage on the route produces output "timestamps"`},
		{file: "sequential.good.yaml", modalities: []string{"video"}, err: `unknown output modality "video"`},
		{file: "sequential.good.yaml", modalities: []string{"frames"}, err: `output_modalities[0]: "frames" is an intermediate kind`},
		{file: "skip.good.yaml", final: 1, stages: "0,1", outputs: "1:audio", need: 2},
		{file: "skip.good.yaml", modalities: []string{"audio", "timestamps"}, final: 3, stages: "0,1,3", outputs: "1:audio 3:timestamps", need: 4},
		{file: "reorder.good.yaml", final: 1, stages: "0,2,1", outputs: "1:audio", need: 3},
		{file: "empty-transitions.good.yaml", final: 0, stages: "0", outputs: "0:audio", need: 1},
		{file: "empty-transitions.good.yaml", modalities: []string{"timestamps"}, final: 2, stages: "0,2", outputs: "2:timestamps", need: 3},
		{file: "skip-middle.good.yaml", final: 2, stages: "0,2", outputs: "2:audio", need: 3},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%v", tc.file, tc.modalities), func(t *testing.T) {
			c := mustParse(t, tc.file)
			s, err := c.Route.Select(tc.modalities)
			if tc.err != "" {
				var se *SelectError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want SelectError containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var outs []string
			for _, o := range s.Outputs {
				outs = append(outs, fmt.Sprintf("%d:%s", o.Stage, o.Kind))
			}
			if s.Final != tc.final || idList(s.Stages) != tc.stages || strings.Join(outs, " ") != tc.outputs || s.NeedParams != tc.need {
				t.Errorf("selection = final %d stages %s outputs %s need %d; want %d %s %s %d",
					s.Final, idList(s.Stages), strings.Join(outs, " "), s.NeedParams, tc.final, tc.stages, tc.outputs, tc.need)
			}
		})
	}
}

func TestSelectSkippedOnly(t *testing.T) {
	data := []byte(`pipeline:
  name: x
  input: text
  stages:
    - {id: 0, name: talker, engine: test-talker, input: text, output: audio, final_output: true}
    - {id: 1, name: stamps, engine: test-stamps, input: audio, output: timestamps, final_output: true}
  stage_transitions: []
`)
	c, err := Parse(data, "inline")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Route.Select([]string{"timestamps"})
	if err == nil || !strings.Contains(err.Error(), `output "timestamps" is produced only by stage 1 (stamps), which the route skips`) {
		t.Errorf("err = %v", err)
	}
}

func TestCheckParams(t *testing.T) {
	c := mustParse(t, "skip.good.yaml") // stages 0,1,(2 skipped), aligner 3
	audio, _ := c.Route.Select(nil)
	stamps, _ := c.Route.Select([]string{"timestamps"})
	cases := []struct {
		sel  *Selection
		n    int
		want string
	}{
		{audio, 0, ""},
		{audio, 2, ""},
		{audio, 4, ""},
		{audio, 1, "sampling_params has 1 entries but this request runs stage 1: it needs at least 2"},
		{audio, 5, "sampling_params has 5 entries but the pipeline has only 4 stage ids"},
		{stamps, 3, "needs at least 4"},
		{stamps, 4, ""},
	}
	for _, tc := range cases {
		err := tc.sel.CheckParams(make([]json.RawMessage, tc.n), nil)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckParams(%d) for final %d = %v, want %q", tc.n, tc.sel.Final, err, tc.want)
		}
	}
}

func TestDigest(t *testing.T) {
	a := mustParse(t, "sequential.good.yaml")
	b := mustParse(t, "sequential.good.yaml")
	if a.Digest() != b.Digest() {
		t.Error("digest not stable")
	}
	c := mustParse(t, "reorder.good.yaml")
	if a.Digest() == c.Digest() {
		t.Error("different pipelines share a digest")
	}
	raw, _ := BuiltinYAML("tts-24k")
	skip, _ := Builtin("tts-raw")
	full, _ := Parse(raw, "x")
	if skip.Digest() == full.Digest() {
		t.Error("a route change does not change the digest")
	}
}

// TestHopDefaults checks the typed deploy keys of the placements that run
// replicas outside the process: given values are kept, the others get
// their defaults, and inproc stages get none.
func TestHopDefaults(t *testing.T) {
	c := mustParse(t, "deploy-hop.good.yaml")
	d := c.Deploy.Stages
	if got := d[0]; got.Link != (Link{}) || got.Worker != (Worker{}) {
		t.Errorf("inproc stage link %+v worker %+v, want zero", got.Link, got.Worker)
	}
	want1 := Link{Timeout: 30 * time.Second, WarmTimeout: DefaultWarmTimeout, HealthInterval: time.Second, HealthFailures: 5}
	if d[1].Link != want1 || d[1].Worker != (Worker{StartTimeout: 20 * time.Second, StopTimeout: 3 * time.Second}) {
		t.Errorf("process stage link %+v worker %+v", d[1].Link, d[1].Worker)
	}
	want2 := Link{WarmTimeout: 5 * time.Second, HealthInterval: DefaultHealthInterval, HealthFailures: DefaultHealthFailures, APIKeyFile: "/run/secrets/api-key", ResolveInterval: 30 * time.Second}
	if d[2].Placement != PlacementRemote || d[2].Link != want2 || d[2].Worker != (Worker{}) {
		t.Errorf("remote stage %+v", d[2])
	}
}

// TestEngineDeployKeys checks that the deploy keys an engine takes reach
// it whatever the stage's placement, and that an engine naming a key no
// engine may take is refused.
func TestEngineDeployKeys(t *testing.T) {
	c, err := Parse([]byte(`
pipeline:
  name: bounded
  input: text
  stages:
    - {id: 0, name: talker, engine: test-bounded, input: text, output: audio, final_output: true}
deploy:
  stages:
    - {id: 0, timeout: 5s, warm_timeout: 1m}
`), "bounded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckEngines(testEngines{}); err != nil {
		t.Fatal(err)
	}
	if name, spec := c.StageSpec(0, 0); name != "test-bounded" || spec.Timeout != 5*time.Second || spec.WarmTimeout != time.Minute {
		t.Errorf("spec of %s: timeout %s, warm_timeout %s", name, spec.Timeout, spec.WarmTimeout)
	}
	var reg engine.Registry
	reg.Register("test-bounded", engine.Driver{DeployKeys: []string{"timeout", "warm_timeout", "health_interval", "max_wait"}})
	err = c.CheckEngines(&reg)
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("an engine taking unknown keys: %v", err)
	}
	for i, k := range []string{"health_interval", "max_wait"} {
		if want := fmt.Sprintf("pipeline.stages[0].engine: engine test-bounded takes the deploy key %q, which is not one an engine may take (timeout, warm_timeout, max_batch, max_batch_delay, migrate)", k); !strings.Contains(errs[i].Error(), want) {
			t.Errorf("error %q; want %q", errs[i], want)
		}
	}
}

// TestVoiceAliases checks that a configuration's aliases replace the
// defaults, and that one without any gets OpenAI's names.
func TestVoiceAliases(t *testing.T) {
	c := mustParse(t, "voice-aliases.good.yaml")
	if want := map[string]string{"alloy": "rms", "narrator": "awb"}; !maps.Equal(c.VoiceAliases, want) {
		t.Errorf("aliases %v, want %v", c.VoiceAliases, want)
	}
	b, err := Builtin("tts")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(b.VoiceAliases, DefaultVoiceAliases) {
		t.Errorf("built-in aliases %v, want the defaults", b.VoiceAliases)
	}
}

// TestMigrateKeys: a stage may move a request after a loss unless its
// deploy entry says migrate: false, and max_migrations defaults to
// DefaultMaxMigrations.
func TestMigrateKeys(t *testing.T) {
	c := mustParse(t, "deploy-migrate.good.yaml")
	if c.Deploy.MaxMigrations != 1 || !c.Deploy.Stages[0].Migrate || c.Deploy.Stages[1].Migrate {
		t.Errorf("max_migrations %d, migrate %t and %t; want 1, true and false",
			c.Deploy.MaxMigrations, c.Deploy.Stages[0].Migrate, c.Deploy.Stages[1].Migrate)
	}
	c = mustParse(t, "sequential.good.yaml")
	if c.Deploy.MaxMigrations != DefaultMaxMigrations {
		t.Errorf("max_migrations %d by default, want %d", c.Deploy.MaxMigrations, DefaultMaxMigrations)
	}
	for _, s := range c.Deploy.Stages {
		if !s.Migrate {
			t.Errorf("stage %d: migrate false by default", s.ID)
		}
	}
}
