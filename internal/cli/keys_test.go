package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// served is an omnistage serve command running in this process.
type served struct {
	base   string
	stderr *testkit.SyncBuffer
	cancel context.CancelFunc
	done   chan int
}

// startServe runs `omnistage serve --addr A args...` with the echo
// pipeline's test engines on a free loopback address A, the environment
// getenv (nil: empty), and returns once /ready answers 200. The test's end
// stops it.
func startServe(t *testing.T, getenv func(string) string, args ...string) *served {
	t.Helper()
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	addr := testkit.FreeAddr(t)
	s := &served{base: "http://" + addr, stderr: &testkit.SyncBuffer{}, done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	env := Env{
		Stdin: strings.NewReader(""), Stdout: s.stderr, Stderr: s.stderr, Getenv: getenv,
		Engines: func(r *engine.Registry) { testengine.Register(r, nil, "test-a", "test-b") },
	}
	go func() { s.done <- Main(ctx, env, append([]string{"serve", "--addr", addr}, args...)) }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(testkit.Timeout)
	for {
		select {
		case code := <-s.done:
			s.done <- code
			t.Fatalf("serve exited with %d while starting:\n%s", code, s.stderr)
		default:
		}
		resp, err := http.Get(s.base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never ready; output:\n%s", s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop cancels the command's context, as a signal would, and returns its
// exit status.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	s.cancel()
	select {
	case code := <-s.done:
		s.done <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after cancellation")
	}
	return -1
}

// post posts body as JSON to path and returns the status and the decoded
// answer.
func (s *served) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	return resp.StatusCode, m
}

// errorCode returns the code of an error answer, "" for another.
func errorCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// stage1Payload returns a stage_input for stage 1 of the echo pipeline,
// made by codec.
func stage1Payload(t *testing.T, codec *payload.Codec) string {
	t.Helper()
	cfg := testkit.Parse(t, echoPipeline)
	s, err := codec.Encode(&payload.Envelope{
		Pipeline: cfg.Pipeline.Name, Digest: cfg.Digest(), TransferID: "t1", RequestID: "r1",
		From: 0, To: 1, Final: 1, Params: make([]json.RawMessage, cfg.Route.NumIDs()),
		Prompt: engine.Prompt{Text: "hi"}, Outputs: []string{"text"},
		Data: []engine.Chunk{{Text: &engine.Text{Text: "hi"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runStage1 posts codec's payload for stage 1 to s and returns the error
// code of the answer, "" when it ran.
func (s *served) runStage1(t *testing.T, codec *payload.Codec) string {
	t.Helper()
	status, m := s.post(t, "/v1/run", map[string]any{"stage_id": 1, "stage_input": stage1Payload(t, codec)})
	if code := errorCode(m); code != "" || status != http.StatusOK {
		return code
	}
	return ""
}

// signingKey returns the id of the key s signs with: the key id in the
// header of its answer to a stage 0 call.
func (s *served) signingKey(t *testing.T) payload.KeyID {
	t.Helper()
	status, m := s.post(t, "/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "hi"}})
	in, _ := m["stage_input"].(string)
	b, err := base64.RawURLEncoding.DecodeString(in)
	if status != http.StatusOK || err != nil || len(b) < 14 {
		t.Fatalf("stage 0 answer %d %v", status, m)
	}
	return payload.KeyID(b[6:14])
}

func keyID(t *testing.T, key string) payload.KeyID {
	t.Helper()
	r, err := payload.NewRing([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return r.Newest()
}

func writeKey(t *testing.T, path, key string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeRefusesUnsignedBeyondLoopback checks that a server on an
// address beyond loopback needs a payload key or --insecure, and that its
// refusal says how to make a key.
func TestServeRefusesUnsignedBeyondLoopback(t *testing.T) {
	cfg := writeConfig(t, echoPipeline)
	key := filepath.Join(t.TempDir(), "payload.key")
	writeKey(t, key, "a payload key of enough length")
	for _, tc := range []struct {
		name string
		args []string
		env  string // the payload key variable
		code int
	}{
		{"every address", []string{"--addr", "0.0.0.0:0"}, "", ExitUsage},
		{"no host", []string{"--addr", ":0"}, "", ExitUsage},
		{"every IPv6 address", []string{"--addr", "[::]:0"}, "", ExitUsage},
		{"a host name", []string{"--addr", "example.com:0"}, "", ExitUsage},
		{"--insecure", []string{"--addr", "0.0.0.0:0", "--insecure"}, "", ExitOK},
		{"a key file", []string{"--addr", "0.0.0.0:0", "--payload-key-file", key}, "", ExitOK},
		{"a key in the environment", []string{"--addr", "0.0.0.0:0"}, "another payload key of enough length", ExitOK},
		{"loopback", []string{"--addr", "127.0.0.1:0"}, "", ExitOK},
		{"localhost", []string{"--addr", "localhost:0"}, "", ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			// Cancelled: a server that starts stops at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			env := Env{
				Stdin: strings.NewReader(""), Stdout: &stderr, Stderr: &stderr, Engines: withTestEngines,
				Getenv: func(name string) string {
					if name == keyfile.PayloadKeyEnv {
						return tc.env
					}
					return ""
				},
			}
			code := Main(ctx, env, append([]string{"serve", "--config", cfg}, tc.args...))
			out := stderr.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tc.code, out)
			}
			refused := strings.Contains(out, "no payload key is set")
			if refused != (tc.code == ExitUsage) {
				t.Fatalf("refusal printed: %t; output:\n%s", refused, out)
			}
			if refused {
				for _, want := range []string{"head -c 32 /dev/urandom | base64 > payload.key", "--payload-key-file payload.key", "$" + keyfile.PayloadKeyEnv, "--insecure"} {
					if !strings.Contains(out, want) {
						t.Errorf("the refusal does not say %q:\n%s", want, out)
					}
				}
			}
		})
	}
}

// TestServePayloadLifetime checks that --payload-lifetime reaches the
// server's codec: a payload issued two hours ago is refused with one hour,
// and taken with 0 (no expiry). Its age is far from either bound, so the
// real clock does.
func TestServePayloadLifetime(t *testing.T) {
	noLeaks(t)
	cfg := writeConfig(t, echoPipeline)
	key := filepath.Join(t.TempDir(), "payload.key")
	writeKey(t, key, "a payload key of enough length")
	old := payload.NewCodec([]byte("a payload key of enough length"), payload.WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	for lifetime, want := range map[string]string{"1h": payload.CodeExpired, "0": ""} {
		s := startServe(t, nil, "--config", cfg, "--payload-key-file", key, "--payload-lifetime", lifetime)
		if code := s.runStage1(t, old); code != want {
			t.Errorf("--payload-lifetime %s: a payload two hours old gets %q, want %q", lifetime, code, want)
		}
		if code := s.stop(t); code != ExitOK {
			t.Errorf("exit %d:\n%s", code, s.stderr)
		}
	}
	if _, stderr, code := runCLI(t, "serve", "--config", cfg, "--payload-lifetime", "-1s"); code != ExitUsage || !strings.Contains(stderr, "--payload-lifetime must not be negative") {
		t.Errorf("negative lifetime: exit %d, %s", code, stderr)
	}
}
