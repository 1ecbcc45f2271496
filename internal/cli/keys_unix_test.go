//go:build unix

package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestServeRotatesKeysOnSIGHUP rotates a server's payload keys the way the
// README says, with a real SIGHUP between the steps: a ring of two key
// files, the first of which takes the next key before the second does.
// After each step the server signs with its last file's key and takes
// payloads signed with either file's key, and only those; a key file that
// is not a key leaves the keys as they were.
func TestServeRotatesKeysOnSIGHUP(t *testing.T) {
	noLeaks(t)
	const k0, k1, k2 = "payload key zero, long enough", "payload key one, long enough", "payload key two, long enough"
	dir := t.TempDir()
	prev, cur := filepath.Join(dir, "previous.key"), filepath.Join(dir, "current.key")
	writeKey(t, prev, k0)
	writeKey(t, cur, k1)
	s := startServe(t, nil, "--config", writeConfig(t, echoPipeline), "--payload-key-file", prev, "--payload-key-file", cur)
	codecs := map[string]*payload.Codec{k0: payload.NewCodec([]byte(k0)), k1: payload.NewCodec([]byte(k1)), k2: payload.NewCodec([]byte(k2))}

	// check checks the server's keys: it signs with signing and takes
	// payloads signed with the keys of accepted.
	check := func(signing string, accepted ...string) {
		t.Helper()
		if got, want := s.signingKey(t), keyID(t, signing); got != want {
			t.Errorf("the server signs with key %s, want %s", got, want)
		}
		for key, codec := range codecs {
			want := payload.CodeKeyUnknown
			for _, a := range accepted {
				if a == key {
					want = ""
				}
			}
			if got := s.runStage1(t, codec); got != want {
				t.Errorf("a payload signed with key %s: %q, want %q", keyID(t, key), got, want)
			}
		}
	}
	hangup := func() {
		t.Helper()
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	check(k1, k0, k1)

	// Step 1: every server takes the next key, none signs with it yet.
	writeKey(t, prev, k2)
	hangup()
	testkit.Eventually(t, "the server taking key two", func() bool { return s.runStage1(t, codecs[k2]) == "" })
	check(k1, k1, k2)

	// Step 2: the next key signs, the current one is still taken.
	writeKey(t, prev, k1)
	writeKey(t, cur, k2)
	hangup()
	testkit.Eventually(t, "the server signing with key two", func() bool { return s.signingKey(t) == keyID(t, k2) })
	check(k2, k1, k2)

	// A bad file: the server keeps its keys and says why.
	writeKey(t, cur, "short")
	hangup()
	testkit.Eventually(t, "the reload refused", func() bool {
		return strings.Contains(s.stderr.String(), "payload keys not reloaded")
	})
	if out := s.stderr.String(); !strings.Contains(out, "current.key: the key is 5 bytes long") {
		t.Errorf("the log does not name the bad file:\n%s", out)
	}
	check(k2, k1, k2)
	if code := s.stop(t); code != ExitOK {
		t.Errorf("exit %d:\n%s", code, s.stderr)
	}
}

// TestServeKeyFilesThatAreNotKeys checks the key files that used to hang
// a server or load half a key: a FIFO (whose read would block) and a
// device are refused at start, at once; a reload that finds a FIFO, or a
// key caught while it was being written (no final line feed, half its
// base64), keeps the keys the server had and says why; and a server
// stops promptly whatever its key files are.
func TestServeKeyFilesThatAreNotKeys(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	config := writeConfig(t, echoPipeline)
	for _, file := range []string{fifo, "/dev/urandom"} {
		var stderr testkit.SyncBuffer
		env := Env{Stdin: strings.NewReader(""), Stdout: &stderr, Stderr: &stderr, Getenv: func(string) string { return "" },
			Engines: func(r *engine.Registry) { testengine.Register(r, nil, "test-a", "test-b") }}
		done := make(chan int, 1)
		go func() {
			done <- Main(context.Background(), env, []string{"serve", "--addr", testkit.FreeAddr(t), "--config", config, "--payload-key-file", file})
		}()
		select {
		case code := <-done:
			if code != ExitUsage || !strings.Contains(stderr.String(), "is not a regular file") {
				t.Errorf("--payload-key-file %s: exit %d:\n%s", file, code, &stderr)
			}
		case <-time.After(testkit.Timeout):
			t.Fatalf("--payload-key-file %s: serve still runs", file)
		}
	}

	const full = "Dm9ZgZRv0qWVpoJBw7HbLqzwjIoNzU3ntk4KkR2UPO0=" // 32 bytes, as base64 writes them
	key := filepath.Join(dir, "current.key")
	writeKey(t, key, full)
	s := startServe(t, nil, "--config", config, "--payload-key-file", key)
	codec := payload.NewCodec([]byte(full))
	if got := s.runStage1(t, codec); got != "" {
		t.Fatalf("the server refused its own key: %q", got)
	}
	reload := func(content []byte, why string) {
		t.Helper()
		if err := os.WriteFile(key, content, 0o600); err != nil {
			t.Fatal(err)
		}
		before := strings.Count(s.stderr.String(), "payload keys not reloaded")
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the reload refused", func() bool {
			return strings.Count(s.stderr.String(), "payload keys not reloaded") > before
		})
		if !strings.Contains(s.stderr.String(), why) {
			t.Errorf("the log does not say %q:\n%s", why, s.stderr)
		}
		if got := s.runStage1(t, codec); got != "" {
			t.Errorf("after a refused reload, the server refuses its key: %q", got)
		}
	}
	reload([]byte(full[:20]), "does not end with a line feed")
	reload([]byte(full[:20]+"\n"), "decode to 15 bytes, the one before to 32")
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the FIFO refused", func() bool { return strings.Contains(s.stderr.String(), "current.key is not a regular file") })
	if code := s.stop(t); code != ExitOK {
		t.Errorf("exit %d:\n%s", code, s.stderr)
	}
}
