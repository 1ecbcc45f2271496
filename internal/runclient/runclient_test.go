package runclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/wire"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The shared client keeps connections alive on purpose; close them so
	// their goroutines do not count as leaks.
	sharedHTTP().CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeStage is a stage server of a pipeline of n stages: stage 0 takes a
// prompt, each stage appends "|id" to its input, the last answers finished
// with the text as output.
type fakeStage struct {
	id, n int
	calls atomic.Int32
	// fail, when set, answers instead of the stage.
	fail func(w http.ResponseWriter, r *http.Request) bool
	// seen records the request bodies.
	mu   sync.Mutex
	seen []wire.RunRequest
	auth []string
}

func (f *fakeStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.URL.Path != RunPath || r.Method != http.MethodPost {
		writeErr(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if f.fail != nil && f.fail(w, r) {
		return
	}
	var req wire.RunRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "bad_request", "bad json: "+err.Error())
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if req.StageID == nil || *req.StageID != f.id {
		writeErr(w, http.StatusBadRequest, "payload_wrong_stage", fmt.Sprintf("this server runs stage %d", f.id))
		return
	}
	var text string
	if f.id == 0 {
		var p wire.Prompt
		if err := json.Unmarshal(req.StageInput, &p); err != nil {
			writeErr(w, http.StatusBadRequest, "bad_request", "stage 0 takes a prompt object")
			return
		}
		text = p.Text
	} else if err := json.Unmarshal(req.StageInput, &text); err != nil {
		writeErr(w, http.StatusBadRequest, "bad_request", "later stages take an opaque string")
		return
	}
	text += fmt.Sprintf("|%d", f.id)
	resp := wire.RunResponse{RequestID: "r1", StageID: f.id + 1, StageInput: text}
	if f.id == f.n-1 {
		resp = wire.RunResponse{RequestID: "r1", StageID: f.id, Finished: true, Output: &wire.Output{Text: text}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
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

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// deadURL returns a URL on 127.0.0.1 where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func prompt(text string) *wire.RunRequest {
	raw, _ := json.Marshal(wire.Prompt{Text: text})
	zero := 0
	return &wire.RunRequest{StageID: &zero, StageInput: raw}
}

func newChain(stages map[int][]string) (*Chain, *[]Hop) {
	var hops []Hop
	c := &Chain{Stages: stages, Backoff: time.Millisecond, OnHop: func(h Hop) { hops = append(hops, h) }}
	return c, &hops
}

func TestChainThreeStages(t *testing.T) {
	f := []*fakeStage{{id: 0, n: 3}, {id: 1, n: 3}, {id: 2, n: 3}}
	urls := map[int][]string{0: {serve(t, f[0])}, 1: {serve(t, f[1]) + "/"}, 2: {serve(t, f[2]) + RunPath}}
	c, hops := newChain(urls)
	c.Client = &Client{APIKey: "sekret"}
	req := prompt("hello")
	req.StageID = nil // means stage 0
	req.SamplingParams = []json.RawMessage{json.RawMessage(`{"voice":"slt"}`), nil, nil}
	resp, err := c.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Finished || resp.Output.Text != "hello|0|1|2" {
		t.Fatalf("answer = %+v, output %+v", resp, resp.Output)
	}
	if len(*hops) != 3 {
		t.Fatalf("hops = %d, want 3", len(*hops))
	}
	for i, h := range *hops {
		if h.Stage != i || h.Attempt != 1 || h.Err != nil || h.RequestBytes == 0 || h.ResponseBytes == 0 || h.Response == nil {
			t.Errorf("hop %d = %+v", i, h)
		}
		if !strings.HasPrefix(h.URL, "http://127.0.0.1:") {
			t.Errorf("hop %d url %q", i, h.URL)
		}
	}
	if got := f[0].seen[0]; *got.StageID != 0 || len(got.SamplingParams) != 3 {
		t.Errorf("stage 0 got %+v", got)
	}
	for _, s := range f[1:] {
		got := s.seen[0]
		if got.SamplingParams != nil || got.RequestID != "" || got.OutputModalities != nil {
			t.Errorf("stage %d got fields beside stage_input: %+v", s.id, got)
		}
		if s.auth[0] != "Bearer sekret" {
			t.Errorf("stage %d auth %q", s.id, s.auth[0])
		}
	}
}

func TestChainErrors(t *testing.T) {
	badRequest := func(w http.ResponseWriter, r *http.Request) bool {
		writeErr(w, http.StatusBadRequest, "payload_signature_invalid", "payload signature does not match")
		return true
	}
	unavailable := func(w http.ResponseWriter, r *http.Request) bool {
		writeErr(w, http.StatusServiceUnavailable, "overloaded", "server busy")
		return true
	}
	internal := func(w http.ResponseWriter, r *http.Request) bool {
		writeErr(w, http.StatusInternalServerError, "stage_failed", "engine crashed")
		return true
	}
	notJSON := func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "upstream exploded\n")
		return true
	}

	t.Run("4xx stops with the server's message and is not retried", func(t *testing.T) {
		a, b := &fakeStage{id: 1, n: 2, fail: badRequest}, &fakeStage{id: 1, n: 2}
		c, hops := newChain(map[int][]string{0: {serve(t, &fakeStage{id: 0, n: 2})}, 1: {serve(t, a), serve(t, b)}})
		_, err := c.Run(context.Background(), prompt("x"))
		var he *HTTPError
		var se *StageError
		if !errors.As(err, &he) || !errors.As(err, &se) {
			t.Fatalf("err = %v (%T)", err, err)
		}
		if he.Status != 400 || he.Code != "payload_signature_invalid" || he.Message != "payload signature does not match" || he.Type != "invalid_request_error" {
			t.Errorf("http error = %+v", he)
		}
		if se.Stage != 1 || se.Attempts != 1 || Retryable(err) {
			t.Errorf("stage error = %+v, retryable %v", se, Retryable(err))
		}
		if !strings.Contains(err.Error(), "payload signature does not match") {
			t.Errorf("message %q lacks the server's", err)
		}
		if a.calls.Load() != 1 || b.calls.Load() != 0 {
			t.Errorf("calls = %d, %d; want 1, 0", a.calls.Load(), b.calls.Load())
		}
		if h := (*hops)[len(*hops)-1]; h.Retrying || h.Err == nil {
			t.Errorf("last hop = %+v", h)
		}
	})

	for _, tc := range []struct {
		name  string
		first func(t *testing.T) string
	}{
		{"first down", deadURL},
		{"first 503", func(t *testing.T) string { return serve(t, &fakeStage{id: 1, n: 2, fail: unavailable}) }},
		{"first 500", func(t *testing.T) string { return serve(t, &fakeStage{id: 1, n: 2, fail: internal}) }},
		{"first 502 not json", func(t *testing.T) string { return serve(t, &fakeStage{id: 1, n: 2, fail: notJSON}) }},
	} {
		t.Run("retry on the second URL when "+tc.name, func(t *testing.T) {
			good := &fakeStage{id: 1, n: 2}
			first := tc.first(t)
			c, hops := newChain(map[int][]string{0: {serve(t, &fakeStage{id: 0, n: 2})}, 1: {first, serve(t, good)}})
			resp, err := c.Run(context.Background(), prompt("x"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Output.Text != "x|0|1" || good.calls.Load() != 1 {
				t.Fatalf("output %q, good calls %d", resp.Output.Text, good.calls.Load())
			}
			h := *hops
			if len(h) != 3 || h[1].URL != first || h[1].Err == nil || !h[1].Retrying || h[2].Attempt != 2 || h[2].Err != nil {
				t.Fatalf("hops = %+v", h)
			}
		})
	}

	t.Run("attempts are bounded", func(t *testing.T) {
		s := &fakeStage{id: 0, n: 1, fail: unavailable}
		c, hops := newChain(map[int][]string{0: {serve(t, s), deadURL(t)}})
		c.Attempts = 3
		c.MaxBackoff = 10 * time.Millisecond // caps the Retry-After of 1s
		start := time.Now()
		_, err := c.Run(context.Background(), prompt("x"))
		var se *StageError
		if !errors.As(err, &se) || se.Attempts != 3 || !Retryable(err) {
			t.Fatalf("err = %v", err)
		}
		if len(*hops) != 3 || s.calls.Load() != 2 {
			t.Fatalf("hops %d, calls %d", len(*hops), s.calls.Load())
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %s: Retry-After not capped by MaxBackoff", d)
		}
	})

	t.Run("no server for the next stage", func(t *testing.T) {
		c, _ := newChain(map[int][]string{0: {serve(t, &fakeStage{id: 0, n: 3})}})
		_, err := c.Run(context.Background(), prompt("x"))
		var ns *NoServerError
		if !errors.As(err, &ns) || ns.Stage != 1 {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("hops are bounded", func(t *testing.T) {
		loop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"request_id":"r","stage_id":0,"finished":false,"stage_input":"again"}`)
		})
		c, hops := newChain(map[int][]string{0: {serve(t, loop)}})
		c.MaxHops = 5
		_, err := c.Run(context.Background(), prompt("x"))
		if err == nil || !strings.Contains(err.Error(), "not finished after 5 hops") || len(*hops) != 5 {
			t.Fatalf("err = %v, hops %d", err, len(*hops))
		}
	})

	t.Run("malformed answers", func(t *testing.T) {
		for _, body := range []string{`{"finished":true}`, `{"finished":false,"stage_id":1}`, `not json`} {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) })
			c, _ := newChain(map[int][]string{0: {serve(t, h)}})
			_, err := c.Run(context.Background(), prompt("x"))
			if err == nil || !strings.Contains(err.Error(), "malformed answer") || Retryable(err) {
				t.Errorf("%s: err = %v", body, err)
			}
		}
	})
}

func TestRunCancel(t *testing.T) {
	entered := make(chan struct{})
	released := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a client that went away only once the
		// body has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		close(entered)
		<-r.Context().Done()
		close(released)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &Chain{Stages: map[int][]string{0: {serve(t, h), serve(t, h)}}}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, prompt("x"))
		errc <- err
	}()
	<-entered
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || Retryable(err) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("server did not see the cancellation")
	}
}

func TestRunCancelDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Chain{Stages: map[int][]string{0: {deadURL(t)}}, Backoff: time.Hour, OnHop: func(Hop) { cancel() }}
	start := time.Now()
	_, err := c.Run(ctx, prompt("x"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("backoff ignored the cancellation")
	}
}

func TestResponseSizeCap(t *testing.T) {
	big := strings.Repeat("a", 4096)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"request_id":"r","stage_id":0,"finished":true,"output":{"text":%q}}`, big)
	})
	u := serve(t, h)
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{1024, false}, {8192, true}} {
		c := &Client{MaxResponseBytes: tc.limit}
		resp, err := c.Run(context.Background(), u, prompt("x"))
		if tc.ok {
			if err != nil || resp.Output.Text != big {
				t.Errorf("limit %d: err %v", tc.limit, err)
			}
			continue
		}
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Limit != tc.limit || Retryable(err) {
			t.Errorf("limit %d: err = %v", tc.limit, err)
		}
	}
	// The cap is not retried on another server.
	n := 0
	chain := &Chain{Client: &Client{MaxResponseBytes: 1024}, Stages: map[int][]string{0: {u, u}}, OnHop: func(Hop) { n++ }}
	if _, err := chain.Run(context.Background(), prompt("x")); err == nil || n != 1 {
		t.Errorf("err %v after %d calls", err, n)
	}
}

func TestHTTPErrorShapes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       HTTPError
	}{
		{"openai", `{"error":{"message":"bad voice","type":"invalid_request_error","code":"bad_request"}}`, 400,
			HTTPError{Status: 400, Type: "invalid_request_error", Code: "bad_request", Message: "bad voice"}},
		{"other json", `{"detail":"m"}`, 422, HTTPError{Status: 422, Message: `{"detail":"m"}`}},
		{"plain text", "nope\n", 404, HTTPError{Status: 404, Message: "nope"}},
		{"empty", "", 502, HTTPError{Status: 502, Message: "Bad Gateway"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})
			_, err := (&Client{}).Run(context.Background(), serve(t, h), prompt("x"))
			var he *HTTPError
			if !errors.As(err, &he) || *he != tc.want {
				t.Fatalf("err = %#v, want %#v", err, tc.want)
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	a, b := &fakeStage{id: 0, n: 1}, &fakeStage{id: 0, n: 1}
	c := &Chain{Stages: map[int][]string{0: {serve(t, a), serve(t, b)}}}
	for range 4 {
		if _, err := c.Run(context.Background(), prompt("x")); err != nil {
			t.Fatal(err)
		}
	}
	if a.calls.Load() != 2 || b.calls.Load() != 2 {
		t.Fatalf("calls = %d, %d; want 2, 2", a.calls.Load(), b.calls.Load())
	}
}

func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(&fakeStage{id: 0, n: 1})
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	defer s.Close()
	c := &Client{}
	for range 5 {
		if _, err := c.Run(context.Background(), s.URL, prompt("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 sequential calls, want 1", n)
	}
}

// BenchmarkChain measures the client's cost of a three-stage request over
// loopback: three calls, each answer decoded and re-posted.
func BenchmarkChain(b *testing.B) {
	stages := map[int][]string{}
	for id := range 3 {
		s := httptest.NewServer(&fakeStage{id: id, n: 3})
		defer s.Close()
		stages[id] = []string{s.URL}
	}
	c := &Chain{Stages: stages}
	req := prompt(strings.Repeat("word ", 200))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Run(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
