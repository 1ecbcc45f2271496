package deploy

import (
	"bytes"
	"cmp"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// localServer is one server of a recipe (a Deployment of a render, a
// service of compose.yaml), to run on this machine.
type localServer struct {
	name string   // its Deployment or service
	args []string // its omnistage arguments, as the recipe gives them
	urls []string // the base URLs by which the others reach it in the recipe
}

// runLocally runs a recipe's servers on this machine as the recipe runs
// them, with its files (by the path the recipe mounts each at) under a
// temporary directory and the URLs by which they reach each other made
// loopback ones: the stage servers (those with --stage), then the front
// end. It returns the front end's base URL once its /ready answers 200;
// the servers stop when the test ends.
func runLocally(t *testing.T, files map[string]string, servers []localServer) string {
	t.Helper()
	dir := t.TempDir()
	var pairs []string
	for p := range files {
		pairs = append(pairs, p, filepath.Join(dir, p))
	}
	addrs := map[string]string{}
	for _, s := range servers {
		addrs[s.name] = freeAddr(t)
		for _, u := range s.urls {
			pairs = append(pairs, u, "http://"+addrs[s.name])
		}
	}
	rewrite := replacer(pairs)
	for p, text := range files {
		local := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Dir(local), filepath.Base(local), rewrite.Replace(text))
	}
	var order []localServer // the stage servers, then the front end
	var fronts []string
	for _, s := range servers {
		if _, ok := argValue(s.args, "--stage"); ok {
			order = append(order, s)
		} else {
			fronts = append(fronts, s.name)
		}
	}
	if len(fronts) != 1 {
		t.Fatalf("servers %v run no --stage; want one front end", fronts)
	}
	for _, s := range servers {
		if s.name == fronts[0] {
			order = append(order, s)
		}
	}
	var front string
	for _, s := range order {
		args := make([]string, len(s.args))
		for i, a := range s.args {
			args[i] = rewrite.Replace(a)
			if i > 0 && s.args[i-1] == "--addr" {
				args[i] = addrs[s.name]
			}
		}
		startServer(t, s.name, args)
		front = "http://" + addrs[s.name]
	}
	waitReady(t, front)
	return front
}

// replacer replaces each old string of pairs with its new one, the longest
// first where one is a prefix of another.
func replacer(pairs []string) *strings.Replacer {
	type pair struct{ old, new string }
	var ps []pair
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	slices.SortFunc(ps, func(a, b pair) int { return cmp.Compare(len(b.old), len(a.old)) })
	var flat []string
	for _, p := range ps {
		flat = append(flat, p.old, p.new)
	}
	return strings.NewReplacer(flat...)
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer is a bytes.Buffer that a process writes to while a test
// may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServer starts omnistage with args and stops it (SIGTERM, then
// SIGKILL after 10 s) when the test ends, logging its output if the test
// failed.
func startServer(t *testing.T, name string, args []string) {
	t.Helper()
	var out lockedBuffer
	cmd := exec.Command(omnistage(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s (omnistage %s):\n%s", name, strings.Join(args, " "), out.String())
		}
	})
}

// waitReady polls a server's /ready until it answers 200, for a minute at
// most.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s: %s", resp.Status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/ready still fails a minute after the servers started: %v", base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// post sends a JSON body to a server's path with the API key and returns
// the response body, failing the test on a status other than 200.
func post(t *testing.T, base, apiKey, path string, body any) []byte {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s: %s: %s", path, b, resp.Status, out)
	}
	return out
}

// speechRate asks a front end for speech of a model as WAV and returns its
// sample rate.
func speechRate(t *testing.T, base, apiKey, model string) int {
	t.Helper()
	wav := post(t, base, apiKey, "/v1/audio/speech", map[string]string{"model": model, "input": "Hello there.", "response_format": "wav"})
	if len(wav) < 12 || string(wav[:4]) != "RIFF" || string(wav[8:12]) != "WAVE" {
		t.Fatalf("model %s: %d bytes of speech, not WAV", model, len(wav))
	}
	for chunk := wav[12:]; len(chunk) >= 8; {
		size := int(bin.LittleEndian.Uint32(chunk[4:8]))
		if string(chunk[:4]) == "fmt " && len(chunk) >= 16 {
			return int(bin.LittleEndian.Uint32(chunk[12:16]))
		}
		if size > len(chunk)-8 {
			break
		}
		chunk = chunk[8+size+size%2:]
	}
	t.Fatalf("model %s: a WAV file without a fmt chunk", model)
	return 0
}

// checkServes checks what a front end serving tts and tts-24k answers:
// each model's speech at its sample rate, OpenAI's tts-1 as the default
// model, and captions, which the aligner's stage servers make.
func checkServes(t *testing.T, base, apiKey, defaultModel string) {
	t.Helper()
	rates := map[string]int{"tts": 16000, "tts-24k": 24000}
	for _, model := range []string{"tts", "tts-24k"} {
		if got := speechRate(t, base, apiKey, model); got != rates[model] {
			t.Errorf("model %s: speech at %d Hz; want %d", model, got, rates[model])
		}
		if vtt := post(t, base, apiKey, "/v1/audio/captions", map[string]string{"model": model, "input": "Hello there."}); !bytes.HasPrefix(vtt, []byte("WEBVTT")) || !bytes.Contains(vtt, []byte("Hello")) {
			t.Errorf("model %s: captions %q", model, vtt)
		}
	}
	if got := speechRate(t, base, apiKey, "tts-1"); got != rates[defaultModel] {
		t.Errorf("model tts-1: speech at %d Hz; want %d, %s's", got, rates[defaultModel], defaultModel)
	}
}
