package stageserver_test

// The memory load of big one-shot /v1/run bodies on a real, signed stage
// server process: a measurement for a person to read (peak and settled
// resident memory), run only when asked, with no bound on its figures.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestBodyLoad posts concurrent forged one-shot bodies (a real signed
// payload header, then random bytes: the signature can be checked only
// once the whole body is decoded) to `BIN serve --stage 1
// --payload-key-file K` and logs the server's resident memory: before, at
// its peak (VmHWM), and 5 and 30 seconds after the answers, with the
// answers' statuses. It runs only when OMNISTAGE_BODY_LOAD names the
// binary; OMNISTAGE_BODY_LOAD_CASES picks the loads ("8x40,16x45" by
// default: bodies × MB).
//
//	go build -o /tmp/omnistage ./cmd/omnistage
//	OMNISTAGE_BODY_LOAD=/tmp/omnistage go test -run TestBodyLoad -v -timeout 10m ./internal/hop
func TestBodyLoad(t *testing.T) {
	bin := os.Getenv("OMNISTAGE_BODY_LOAD")
	if bin == "" {
		t.Skip("set OMNISTAGE_BODY_LOAD to an omnistage binary to measure its memory under big /v1/run bodies")
	}
	cases := os.Getenv("OMNISTAGE_BODY_LOAD_CASES")
	if cases == "" {
		cases = "8x40,16x45"
	}
	for c := range strings.SplitSeq(cases, ",") {
		var n, mb int
		if _, err := fmt.Sscanf(c, "%dx%d", &n, &mb); err != nil {
			t.Fatalf("OMNISTAGE_BODY_LOAD_CASES: %q: %v", c, err)
		}
		t.Run(c, func(t *testing.T) { bodyLoad(t, bin, n, mb*1000*1000) })
	}
}

func bodyLoad(t *testing.T, bin string, n, size int) {
	dir := t.TempDir()
	key := "body-load-key-0123456789abcdef"
	keyFile := filepath.Join(dir, "payload.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--stage", "1", "--addr", addr, "--payload-key-file", keyFile)
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	url := "http://" + addr
	testkit.Eventually(t, "the stage server ready", func() bool {
		resp, err := http.Get(url + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	body := forgedBody(t, key, size)
	pid := cmd.Process.Pid
	base := vm(t, pid, "VmRSS")

	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			code := "error"
			resp, err := client.Post(url+"/v1/run", "application/json", bytes.NewReader(body))
			if err == nil {
				var e struct {
					Error struct{ Code string } `json:"error"`
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = json.Unmarshal(data, &e)
				code = fmt.Sprintf("%d %s", resp.StatusCode, e.Error.Code)
			} else {
				code = err.Error()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	peak, answered := vm(t, pid, "VmHWM"), vm(t, pid, "VmRSS")
	time.Sleep(5 * time.Second) // the settled memory is what this measures
	after5 := vm(t, pid, "VmRSS")
	time.Sleep(25 * time.Second)
	after30 := vm(t, pid, "VmRSS")
	var answers []string
	for c, k := range codes {
		answers = append(answers, fmt.Sprintf("%d × %s", k, c))
	}
	sort.Strings(answers)
	t.Logf("%d bodies of %d MB in %s: RSS %d MB before, peak %d MB, %d MB at the last answer, %d MB 5 s later, %d MB 30 s later; answers: %s",
		n, size/1e6, took.Round(time.Millisecond), base>>20, peak>>20, answered>>20, after5>>20, after30>>20, strings.Join(answers, ", "))
}

// forgedBody returns a JSON /v1/run body for stage 1 of about size bytes
// whose payload starts with the header of one signed with key, followed
// by random bytes: a server with key checks its signature, and refuses
// it, only after decoding all of it.
func forgedBody(t *testing.T, key string, size int) []byte {
	t.Helper()
	real, err := payload.NewCodec([]byte(key)).Encode(&payload.Envelope{
		Pipeline: "tts", Digest: [32]byte{1}, TransferID: "t", RequestID: "r", From: 0, To: 1, Final: 1,
		Params: make([]json.RawMessage, 3), Outputs: []string{"audio"},
		Data: []engine.Chunk{{Text: &engine.Text{Text: "x"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	header, err := base64.RawURLEncoding.DecodeString(real)
	if err != nil {
		t.Fatal(err)
	}
	const head, tail = `{"stage_id":1,"stage_input":"`, `"}`
	bin := make([]byte, base64.RawURLEncoding.DecodedLen(size-len(head)-len(tail)))
	copy(bin, header[:24]) // magic, version, flags, key id, issued at (and more)
	rand.Read(bin[24:])
	out := make([]byte, 0, size)
	out = append(out, head...)
	out = base64.RawURLEncoding.AppendEncode(out, bin)
	return append(out, tail...)
}

// vm returns a size field of /proc/pid/status (VmRSS, VmHWM) in bytes.
func vm(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
