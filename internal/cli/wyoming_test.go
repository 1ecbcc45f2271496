package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/testkit"
)

const wyomingPipeline = `pipeline:
  name: tone
  input: text
  stages:
    - {id: 0, name: talker, engine: test-tone, input: text, output: audio, final_output: true}
`

// TestServeWyomingUsage: --wyoming refuses an address beyond loopback
// without --wyoming-insecure, and a stage server.
func TestServeWyomingUsage(t *testing.T) {
	cfg := writeConfig(t, wyomingPipeline)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", cfg, "--wyoming", "0.0.0.0:10200"}, "--wyoming 0.0.0.0:10200 reaches beyond this machine"},
		{[]string{"serve", "--config", cfg, "--wyoming", ":10200"}, "reaches beyond this machine"},
		{[]string{"serve", "--config", cfg, "--wyoming", "homeassistant.lan:10200"}, "reaches beyond this machine"},
		{[]string{"serve", "--config", cfg, "--stage", "0", "--wyoming", "127.0.0.1:10200"}, "a stage server (--stage) has none"},
		{[]string{"serve", "--config", cfg, "--wyoming-insecure"}, "--wyoming-insecure needs --wyoming"},
		{[]string{"serve", "--config", cfg, "--wyoming-peers", "private"}, "--wyoming-peers needs --wyoming"},
		{[]string{"serve", "--config", cfg, "--wyoming", "127.0.0.1:10200", "--wyoming-peers", "lan"}, `--wyoming-peers: "lan" is no network`},
		{[]string{"serve", "--config", cfg, "--live-share", "0"}, "--live-share: the share of live input is 0"},
		{[]string{"serve", "--config", cfg, "--live-share", "1.5"}, "want more than 0 and at most 1"},
		{[]string{"serve", "--config", cfg, "--max-sessions", "0"}, "--max-sessions 0: want at least 1"},
	}
	for _, tc := range cases {
		_, stderr, code := runCLI(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}

// TestWyomingPeers: --wyoming-peers names networks by CIDR or by word;
// without it, loopback is served, and the private networks too with
// --wyoming-insecure.
func TestWyomingPeers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		in   []string
		out  []string
		any  bool
	}{
		{args: nil, in: []string{"127.0.0.1", "::1"}, out: []string{"192.168.1.20", "8.8.8.8"}},
		{args: []string{"--wyoming-insecure"}, in: []string{"127.0.0.1", "192.168.1.20", "10.1.2.3", "172.17.0.2", "fd00::1", "fe80::1"}, out: []string{"8.8.8.8", "172.32.0.1", "2001:db8::1"}},
		{args: []string{"--wyoming-peers", "192.168.1.0/24,loopback"}, in: []string{"192.168.1.20", "127.0.0.1"}, out: []string{"192.168.2.1", "10.0.0.1"}},
		{args: []string{"--wyoming-insecure", "--wyoming-peers", "any"}, any: true},
	} {
		addr := "127.0.0.1:10200"
		for _, a := range tc.args {
			if a == "--wyoming-insecure" {
				addr = "0.0.0.0:10200"
			}
		}
		f, _, ok := parseServeFlags(Env{Stdout: io.Discard, Stderr: io.Discard}, append([]string{"--wyoming", addr}, tc.args...))
		if !ok {
			t.Fatalf("%v: refused", tc.args)
		}
		if tc.any != (f.wyoming.peers == nil) {
			t.Errorf("%v: peers %v", tc.args, f.wyoming.peers)
		}
		has := func(ip string) bool {
			for _, p := range f.wyoming.peers {
				if p.Contains(netip.MustParseAddr(ip)) {
					return true
				}
			}
			return false
		}
		for _, ip := range tc.in {
			if !has(ip) {
				t.Errorf("%v: %s is not served", tc.args, ip)
			}
		}
		for _, ip := range tc.out {
			if has(ip) {
				t.Errorf("%v: %s is served", tc.args, ip)
			}
		}
	}
}

// TestServeWyoming: serve --wyoming answers Wyoming beside the HTTP API,
// over the same pipeline, until it is stopped; a port already taken fails
// the start.
func TestServeWyoming(t *testing.T) {
	cfg := writeConfig(t, wyomingPipeline)
	addr, wyAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	stderr := &testkit.SyncBuffer{}
	env := Env{Stdin: strings.NewReader(""), Stdout: stderr, Stderr: stderr, Getenv: func(string) string { return "" },
		Engines: func(r *engine.Registry) { testengine.RegisterTone(r, "test-tone") }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, env, []string{"serve", "--config", cfg, "--addr", addr, "--wyoming", wyAddr})
	}()
	testkit.Eventually(t, "the server to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	conn, err := net.Dial("tcp", wyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testkit.Timeout))
	br := bufio.NewReader(conn)
	write := func(line string) {
		if _, err := io.WriteString(conn, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (string, map[string]any, []byte) {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading: %v; server output:\n%s", err, stderr)
		}
		var h struct {
			Type          string `json:"type"`
			DataLength    int    `json:"data_length"`
			PayloadLength int    `json:"payload_length"`
		}
		if err := json.Unmarshal(line, &h); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, h.DataLength)
		payload := make([]byte, h.PayloadLength)
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(data, &m)
		return h.Type, m, payload
	}
	write(`{"type":"describe"}`)
	if typ, m, _ := read(); typ != "info" || !strings.Contains(mustJSON(t, m), `"name":"tone"`) {
		t.Fatalf("%s %v; want the info naming the tone pipeline", typ, m)
	}
	write(`{"type":"synthesize","data":{"text":"hello"}}`)
	samples := 0
	for typ := ""; typ != "audio-stop"; {
		var payload []byte
		typ, _, payload = read()
		samples += len(payload) / 2
	}
	if want := testengine.ToneSamples("hello"); samples != want {
		t.Errorf("%d samples, want %d", samples, want)
	}

	// A second server cannot take the port.
	errOut := &testkit.SyncBuffer{}
	env2 := env
	env2.Stdout, env2.Stderr = errOut, errOut
	if code := Main(context.Background(), env2, []string{"serve", "--config", cfg, "--addr", testkit.FreeAddr(t), "--wyoming", wyAddr}); code != ExitFailure || !strings.Contains(errOut.String(), "omnistage serve: --wyoming: listen tcp") {
		t.Errorf("a taken port: exit %d, %q", code, errOut)
	}

	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("exit %d; output:\n%s", code, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := net.Dial("tcp", wyAddr); err == nil {
		t.Error("the Wyoming port still takes connections")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
