// Package deploy tests the recipes that deploy omnistage: the container
// image's Dockerfile and .dockerignore, the one-host compose.yaml, and the
// Helm chart in helm/omnistage.
//
// It is a Go module of its own so that the heavy libraries these tests parse
// and render with (BuildKit's Dockerfile parser, compose-go, Helm and the
// Kubernetes API types) stay out of the server's go.mod. Every config file
// the recipes hand to omnistage is checked by the real thing: the tests
// build cmd/omnistage once and run `omnistage route --config F` on it.
package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is the root of the omnistage repository, which holds this module.
const repoRoot = ".."

// binary is the omnistage binary built for this test run; buildOnce builds
// it the first time a test asks for it.
var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildDir  string
)

// printMemoryLimit, set in the environment of this test binary, makes it
// print the memory limit the Go runtime took from GOMEMLIMIT and exit: how
// the GOMEMLIMIT tests ask Go itself what a value means.
const printMemoryLimit = "OMNISTAGE_DEPLOY_TEST_PRINT_MEMORY_LIMIT"

func TestMain(m *testing.M) {
	if os.Getenv(printMemoryLimit) != "" {
		fmt.Println(debug.SetMemoryLimit(-1))
		os.Exit(0)
	}
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// omnistage returns the path of an omnistage binary built from
// ../cmd/omnistage with cgo, as the Dockerfile builds it. It fails the test
// when the build fails (scripts/install-deps.sh installs what it needs).
func omnistage(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "omnistage-deploy-test-")
		if buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, "omnistage")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/omnistage")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/omnistage: %v\n%s", err, out)
			return
		}
		binary = bin
	})
	if buildErr != nil {
		t.Fatalf("building omnistage (run scripts/install-deps.sh first): %v", buildErr)
	}
	return binary
}

// routeJSON is the part of what `omnistage route --json` prints (the
// object GET /v1/pipeline answers) that these tests look into.
type routeJSON struct {
	Name    string  `json:"name"`
	Route   []int   `json:"route"`
	Stages  []stage `json:"stages"` // the declared stages
	Aligner *stage  `json:"aligner"`
}

// stage is one stage of routeJSON.
type stage struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Engine string `json:"engine"`
}

// stages returns every stage id's stage: the declared ones, then the
// aligner.
func (r routeJSON) stages() []stage {
	all := append([]stage(nil), r.Stages...)
	if r.Aligner != nil {
		all = append(all, *r.Aligner)
	}
	return all
}

// onRoute returns the ids of the stages a stage server is needed for: the
// route's and the aligner.
func (r routeJSON) onRoute() []int {
	ids := append([]int(nil), r.Route...)
	if r.Aligner != nil {
		ids = append(ids, r.Aligner.ID)
	}
	return ids
}

// route validates a config holding one pipeline with `omnistage route
// --config ref --json` (ref is a file or builtin:NAME) and returns the
// resolved route. A config omnistage refuses fails the test with
// omnistage's reasons.
func route(t *testing.T, ref string) routeJSON {
	t.Helper()
	rs := routes(t, ref)
	if len(rs) != 1 {
		t.Fatalf("omnistage route --config %s: %d pipelines; want one", ref, len(rs))
	}
	return rs[0]
}

// routes validates configs together with `omnistage route --json --config
// ref ...`, as a server given them would load them (names unique across
// them), and returns the route of every pipeline, in order.
func routes(t *testing.T, refs ...string) []routeJSON {
	t.Helper()
	args := []string{"route", "--json"}
	for _, ref := range refs {
		args = append(args, "--config", ref)
	}
	cmd := exec.Command(omnistage(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("omnistage %s: %v; omnistage says:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var rs []routeJSON
	if out = bytes.TrimSpace(out); !bytes.HasPrefix(out, []byte("[")) {
		out = append(append([]byte("["), out...), ']') // one pipeline: one object
	}
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("omnistage %s: %v in %s", strings.Join(args, " "), err, out)
	}
	return rs
}

// routeText validates config text as route does, from a file in a
// temporary directory.
func routeText(t *testing.T, name, text string) routeJSON {
	t.Helper()
	return route(t, writeFile(t, t.TempDir(), name, text))
}

// writeFile writes text to a file of dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// serverConfig is the part of an omnistage config file these tests look
// into: the pipeline section, kept whole for comparisons, and the deploy
// section's stage entries.
type serverConfig struct {
	Pipeline map[string]any `json:"pipeline"`
	Deploy   struct {
		Stages []deployStage `json:"stages"`
	} `json:"deploy"`
}

// deployStage is one entry of a config's deploy.stages.
type deployStage struct {
	ID         int      `json:"id"`
	Placement  string   `json:"placement"`
	Endpoints  []string `json:"endpoints"`
	APIKeyFile string   `json:"api_key_file"`
}

// entry returns the deploy entry of stage id.
func (c serverConfig) entry(id int) (deployStage, bool) {
	for _, e := range c.Deploy.Stages {
		if e.ID == id {
			return e, true
		}
	}
	return deployStage{}, false
}

// parseConfig decodes config text leniently (omnistage route is the strict
// check) into a serverConfig.
func parseConfig(t *testing.T, name, text string) serverConfig {
	t.Helper()
	var c serverConfig
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// readFile returns a file of the repository, relative to its root.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// builtinPipeline returns the pipeline section of a built-in pipeline.
func builtinPipeline(t *testing.T, name string) map[string]any {
	t.Helper()
	file := "internal/pipeline/builtin/" + name + ".yaml"
	return parseConfig(t, file, readFile(t, file)).Pipeline
}

// argValue returns the value that follows flag in args.
func argValue(args []string, flag string) (string, bool) {
	vs := argValues(args, flag)
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// argValues returns every value given to flag in args, in order.
func argValues(args []string, flag string) []string {
	var vs []string
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			vs = append(vs, args[i+1])
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			vs = append(vs, v)
		}
	}
	return vs
}
