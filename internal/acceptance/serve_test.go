package acceptance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

// server is an `omnistage serve` process, run as a user runs it.
type server struct {
	url    string
	addr   string
	cmd    *exec.Cmd
	out    *testkit.SyncBuffer // its stderr: JSON log lines, its workers' output
	done   chan error
	client *http.Client // reaches it: http.DefaultClient, or one in its network namespace
}

// listening matches the server's first log line, which names its address.
var listening = regexp.MustCompile(`"msg":"http server listening","addr":"([0-9.:]+)"`)

// serve starts `omnistage serve args...` (with --addr 127.0.0.1:0 unless
// args give --addr) and returns once it is ready. It stops it, with
// SIGTERM, when the test ends.
func serve(tb testing.TB, args ...string) *server {
	tb.Helper()
	return serveIn(tb, "", args...)
}

// serveIn is serve in the network namespace ns ("" for this process's).
func serveIn(tb testing.TB, ns string, args ...string) *server {
	tb.Helper()
	if !strings.Contains(strings.Join(args, " "), "--addr") {
		args = append(args, "--addr", "127.0.0.1:0")
	}
	s := &server{out: &testkit.SyncBuffer{}, done: make(chan error, 1), client: http.DefaultClient}
	s.cmd = exec.Command(omnistage(tb), append([]string{"serve"}, args...)...)
	if ns != "" {
		// ip netns exec execs the command: the process is omnistage's.
		s.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, omnistage(tb), "serve"}, args...)...)
		s.client = nsClient(ns)
	}
	s.cmd.Stderr = s.out
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	tb.Cleanup(func() { s.stop(tb) })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m := listening.FindStringSubmatch(s.out.String()); m != nil {
			s.addr, s.url = m[1], "http://"+m[1]
			break
		}
		s.wait(tb, deadline)
	}
	for {
		resp, err := s.client.Get(s.url + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		s.wait(tb, deadline)
	}
}

// wait pauses a little while s starts, failing the test if s has exited
// or the deadline has passed.
func (s *server) wait(tb testing.TB, deadline time.Time) {
	tb.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		tb.Fatalf("omnistage %s exited while starting (%v):\n%s", strings.Join(s.cmd.Args[1:], " "), err, s.out)
	case <-time.After(10 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		tb.Fatalf("omnistage %s not ready after 2 minutes:\n%s", strings.Join(s.cmd.Args[1:], " "), s.out)
	}
}

// stop stops s with SIGTERM and waits for it, once.
func (s *server) stop(tb testing.TB) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil && !strings.Contains(err.Error(), "killed") {
			tb.Errorf("omnistage %s: %v\n%s", strings.Join(s.cmd.Args[1:], " "), err, s.out)
		}
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		tb.Errorf("omnistage %s did not stop within a minute", strings.Join(s.cmd.Args[1:], " "))
	}
}

// kill kills s with SIGKILL and waits for it.
func (s *server) kill(tb testing.TB) {
	tb.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		tb.Fatal(err)
	}
	err := <-s.done
	s.done <- err
}

// workerRE matches the line a parent prints when one of its workers
// listens.
var workerRE = regexp.MustCompile(`worker (\S+) \(pid (\d+)\): listening on ([0-9.:]+)`)

// worker is one of a server's worker processes.
type worker struct {
	replica string
	pid     int
	url     string
	key     string // its API key, from its environment
}

// workers returns the worker processes s started, the latest per replica.
func (s *server) workers(tb testing.TB) map[string]worker {
	tb.Helper()
	ws := map[string]worker{}
	for _, w := range s.allWorkers(tb) {
		ws[w.replica] = w
	}
	return ws
}

// allWorkers returns the worker processes s started, in the order they
// listened (the replicas of several pipelines may share names).
func (s *server) allWorkers(tb testing.TB) []worker {
	tb.Helper()
	var ws []worker
	for _, m := range workerRE.FindAllStringSubmatch(s.out.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		w := worker{replica: m[1], pid: pid, url: "http://" + m[3]}
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
			for _, kv := range bytes.Split(env, []byte{0}) {
				if k, v, ok := strings.Cut(string(kv), "="); ok && k == "OMNISTAGE_WORKER_API_KEY" {
					w.key = v
				}
			}
		}
		ws = append(ws, w)
	}
	return ws
}

// writeFile writes text to a file in a temporary directory and returns its
// path.
func writeFile(tb testing.TB, name, text string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// ttsWith is the built-in tts pipeline with the deploy entries of deploy
// (one "- {...}" per line, indented for deploy.stages; none when empty).
func ttsWith(tb testing.TB, deploy string) string {
	return testkit.BuiltinWith(tb, "tts", deploy)
}

// speech is a request's audio and word timestamps.
type speech struct {
	audio *engine.Audio
	words []engine.Word
}

// generate posts text to /v1/generate on url for audio and timestamps.
func generate(tb testing.TB, url, text string) speech {
	tb.Helper()
	body, _ := json.Marshal(apijson.GenerateRequest{Input: &apijson.Input{Text: text}, OutputModalities: []string{"audio", "timestamps"}})
	resp, err := http.Post(url+"/v1/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("POST %s/v1/generate: %d %s (%v)", url, resp.StatusCode, data, err)
	}
	var gen apijson.GenerateResponse
	if err := json.Unmarshal(data, &gen); err != nil {
		tb.Fatal(err)
	}
	var sp speech
	for _, o := range gen.Outputs {
		if o.Audio != nil {
			if sp.audio, err = audio.ReadWAV(bytes.NewReader(o.Audio.Data)); err != nil {
				tb.Fatal(err)
			}
		}
		if o.Timestamps != nil {
			sp.words = o.Timestamps
		}
	}
	if sp.audio == nil || len(sp.words) == 0 {
		tb.Fatalf("POST %s/v1/generate answered %.300s", url, data)
	}
	return sp
}

// events opens a streamed /v1/generate (NDJSON) of text on url with
// request id id and returns its events as they come, and a function that
// closes the request.
func events(tb testing.TB, ctx context.Context, url, id, text string) (<-chan apijson.Event, func()) {
	tb.Helper()
	body, _ := json.Marshal(apijson.GenerateRequest{Input: &apijson.Input{Text: text}, RequestID: id, Stream: apijson.StreamNDJSON})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/generate", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tb.Fatalf("POST %s/v1/generate: %d %s", url, resp.StatusCode, data)
	}
	ch := make(chan apijson.Event, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var ev apijson.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				ch <- ev
			}
		}
	}()
	return ch, func() { resp.Body.Close() }
}

// metric returns the sum of url's /metrics samples of series: a metric's
// name ("omnistage_requests_inflight", every pipeline's), or its name with
// labels (`omnistage_stage_bindings{stage="1"}`), which a sample's labels
// must include. It fails the test when no sample matches; key is the
// bearer token, if any.
func metric(tb testing.TB, url, key, series string) float64 {
	tb.Helper()
	sum, ok := sumSamples(metricsText(tb, url, key), series)
	if !ok {
		tb.Fatalf("%s/metrics has no %s", url, series)
	}
	return sum
}

// metricsText returns url's /metrics answer; key is the bearer token, if
// any.
func metricsText(tb testing.TB, url, key string) string {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(text)
}

// sumSamples sums the samples of series (as metric takes it) in the text
// of a /metrics answer; ok reports whether any matched.
func sumSamples(text, series string) (sum float64, ok bool) {
	name, want, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	for _, line := range strings.Split(text, "\n") {
		sample, value, found := strings.Cut(line, " ")
		if !found || strings.HasPrefix(line, "#") {
			continue
		}
		sampleName, labels, _ := strings.Cut(strings.TrimSuffix(sample, "}"), "{")
		if sampleName != name || !hasLabels(labels, want) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

// hasLabels reports whether labels (`a="1",b="2"`) include each of want.
func hasLabels(labels, want string) bool {
	have := strings.Split(labels, ",")
	for _, w := range strings.Split(want, ",") {
		if w != "" && !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// idle reports whether url holds no request and no binding in the given
// stages.
func idle(tb testing.TB, url, key string, stages ...int) bool {
	tb.Helper()
	if metric(tb, url, key, "omnistage_requests_inflight") != 0 {
		return false
	}
	for _, id := range stages {
		if metric(tb, url, key, fmt.Sprintf(`omnistage_stage_bindings{stage="%d"}`, id)) != 0 {
			return false
		}
	}
	return true
}

// within polls cond every millisecond for at most d and returns how long
// it took to hold, or fails the test.
func within(tb testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			tb.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}
