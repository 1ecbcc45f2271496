// Package hoptest holds what the tests of /v1/run's three sides (the
// client in package hop, the stage server, the coordinator) share: a
// pipeline of test engines, stage servers of it on loopback, and a way to
// collect a chain's outputs.
package hoptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/coordinator"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

// Main runs a test binary's tests, then fails it if they left goroutines
// behind. The shared client keeps connections alive on purpose; Main
// closes them first so that their goroutines do not count as leaks.
func Main(m *testing.M) {
	code := m.Run()
	(&hop.Client{}).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TextPipeline is three text stages of test engines, each appending its
// mark to every chunk's trace; stage 0 emits two chunks per input chunk.
// Stage 1's output is final too: a request that selects text selects
// stage 2's (the last), one that runs only to stage 1 gets stage 1's.
const TextPipeline = `
pipeline:
  name: text
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
    - {id: 2, name: c, engine: test-c, input: text, output: text, final_output: true}
deploy:
  abort_timeout: 5s
  stages:
    - {id: 0, options: {chunks: 2}}
`

// Registry holds TextPipeline's test engines, steered by hooks (nil for
// none).
func Registry(hooks *testengine.Hooks) *engine.Registry {
	r := &engine.Registry{}
	testengine.Register(r, hooks, "test-a", "test-b", "test-c")
	return r
}

// StartStages runs a headless stage server per stage of cfg, signing with
// key, and returns their URLs by stage id.
func StartStages(t testing.TB, cfg *pipeline.Config, key string, hooks *testengine.Hooks) map[int][]string {
	t.Helper()
	urls := map[int][]string{}
	for _, id := range cfg.Route.Chain() {
		stage := id
		s := apitest.Start(t, cfg, orchestrator.Options{Registry: Registry(hooks)}, api.Options{Stage: &stage, Codec: payload.NewCodec([]byte(key))})
		urls[id] = []string{s.URL}
	}
	return urls
}

// Prompt is stage 0's request for text.
func Prompt(text string, modalities ...string) *hop.RunRequest {
	raw, _ := json.Marshal(engine.Prompt{Text: text})
	zero := 0
	return &hop.RunRequest{StageID: &zero, StageInput: raw, OutputModalities: modalities}
}

// WriteErr answers with an error in the OpenAI shape.
func WriteErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"code":%q}}`, msg, typ, code)
}

// Collected gathers a chain's outputs, by kind, as texts.
type Collected map[engine.Kind][]string

// Add is a coordinator.OutputFunc that collects ch.
func (c Collected) Add(kind engine.Kind, ch engine.Chunk) error {
	switch {
	case ch.Text != nil:
		c[kind] = append(c[kind], ch.Text.Text)
	default:
		c[kind] = append(c[kind], string(ch.Kind()))
	}
	return nil
}

func (c Collected) String() string {
	var parts []string
	for _, k := range engine.Kinds {
		if len(c[k]) > 0 {
			parts = append(parts, fmt.Sprintf("%s=%s", k, strings.Join(c[k], " / ")))
		}
	}
	return strings.Join(parts, "; ")
}

// Idle waits until the orchestrators hold no request and no binding.
func Idle(t testing.TB, orchs ...*orchestrator.Orchestrator) {
	t.Helper()
	for _, o := range orchs {
		testkit.Eventually(t, "no request or binding held", func() bool {
			s := o.Stats()
			return s.InFlight == 0 && s.Bindings() == 0
		})
	}
}

// Run runs req through a chain and collects its outputs.
func Run(ctx context.Context, c *coordinator.Chain, req *hop.RunRequest) (Collected, *coordinator.Outcome, error) {
	got := Collected{}
	res, err := c.Run(ctx, req, got.Add)
	return got, res, err
}
