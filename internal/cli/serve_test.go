package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/testengine"
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
	addr := testkit.FreeAddr(t)
	var stderr testkit.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := Env{
		Stdin: strings.NewReader(""), Stdout: &stderr, Stderr: &stderr, Getenv: func(string) string { return "" },
		Engines: func(r *engine.Registry) { testengine.Register(r, nil, "test-a", "test-b") },
	}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, env, []string{"serve", "--config", writeConfig(t, echoPipeline), "--addr", addr})
	}()
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never ready; output:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Post(base+"/v1/generate", "application/json", strings.NewReader(`{"input": "hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("generate: %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d; output:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after cancellation")
	}
}

func TestServeUsageErrors(t *testing.T) {
	cfg := writeConfig(t, echoPipeline)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", cfg, "--stage", "7"}, "--stage 7: not a stage on the route"},
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
