package cli

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

const echoPipeline = `pipeline:
  name: echo
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text}
    - {id: 1, name: b, engine: test-b, input: text, output: text, final_output: true}
`

// TestServeRunsUntilCancelled starts the serve command, waits for it to be
// ready, sends a request, then cancels its context as a signal would and
// checks that it drains and exits cleanly.
func TestServeRunsUntilCancelled(t *testing.T) {
	s := startServe(t, nil, "--config", writeConfig(t, echoPipeline))
	status, m := s.post(t, "/v1/generate", map[string]any{"input": "hi"})
	if status != http.StatusOK {
		t.Errorf("generate: %d %v", status, m)
	}
	if code := s.stop(t); code != ExitOK {
		t.Errorf("exit %d; output:\n%s", code, s.stderr)
	}
}

func TestServeUsageErrors(t *testing.T) {
	cfg := writeConfig(t, echoPipeline)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", cfg, "--stage", "7"}, "--stage: stage 7 is not on the route"},
		{[]string{"serve", "--config", cfg, "--payload-key-file", "/does/not/exist"}, "--payload-key-file"},
		{[]string{"serve", "--config", "/does/not/exist.yaml"}, "no such file"},
		{[]string{"serve", "--config", cfg, "extra"}, "extra"},
	}
	for _, tc := range cases {
		_, stderr, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestServeAllowedHosts: --allowed-hosts is a comma-separated list, and a
// server listening on a name answers to it too.
func TestServeAllowedHosts(t *testing.T) {
	f, _, ok := parseServeFlags(Env{Stderr: io.Discard}, []string{"--allowed-hosts", " a.example, .svc.cluster.local,", "--addr", "stage-1.internal:8101"})
	if !ok {
		t.Fatal("flags refused")
	}
	if got := f.apiOptions().AllowedHosts; !slices.Equal(got, []string{"a.example", ".svc.cluster.local", "stage-1.internal"}) {
		t.Errorf("allowed hosts %q", got)
	}
	f, _, _ = parseServeFlags(Env{Stderr: io.Discard}, []string{"--addr", "10.0.0.7:8101"})
	if got := f.apiOptions().AllowedHosts; len(got) != 0 {
		t.Errorf("an address's allowed hosts: %q, want none", got)
	}
}
