package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/testkit"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/apijson"
)

func TestUnknownRouteAndMethod(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	for _, tc := range []struct {
		method, path string
		status       int
		code, msg    string
		allow        string
	}{
		{"GET", "/v1/chat/completions", 404, "unknown_route", "no endpoint GET /v1/chat/completions", ""},
		{"GET", "/v1", 404, "unknown_route", "endpoints:", ""},
		{"POST", "/v1/audio/speech/extra", 404, "unknown_route", "no endpoint", ""},
		{"GET", "/v1/audio/speech", 405, "method_not_allowed", "method GET is not allowed on /v1/audio/speech; use POST", "POST"},
		{"PUT", "/v1/requests/r1", 405, "method_not_allowed", "use DELETE or GET", "DELETE, GET, HEAD"},
		{"POST", "/health", 405, "method_not_allowed", "use GET", "GET, HEAD"},
		{"DELETE", "/v1/run", 405, "method_not_allowed", "use POST", "POST"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := f.do(context.Background(), tc.method, tc.path, nil)
			wantError(t, resp, body, tc.status, tc.code, tc.msg)
			if tc.allow != "" && resp.Header.Get("Allow") != tc.allow {
				t.Errorf("Allow %q, want %q", resp.Header.Get("Allow"), tc.allow)
			}
		})
	}
	if resp, _ := f.do(context.Background(), http.MethodHead, "/health", nil); resp.StatusCode != 200 {
		t.Errorf("HEAD /health: %d", resp.StatusCode)
	}
}

// TestUnknownRouteListsEndpoints checks the list of endpoints a 404
// unknown_route answer gives, on a full server and on a headless stage
// server: every endpoint the server serves, and nothing else, each
// answered by its route.
func TestUnknownRouteListsEndpoints(t *testing.T) {
	stage := 1
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"full", Options{}, []string{
			"POST /v1/audio/speech", "GET /v1/audio/speech/stream", "POST /v1/generate", "POST /v1/run", "GET and DELETE /v1/requests/{id}", "GET /v1/models", "GET /v1/audio/models",
			"GET /v1/audio/voices", "POST /v1/audio/captions",
			"GET /v1/text-to-speech/{voice_id}/multi-stream-input", "GET /v1/text-to-speech/{voice_id}/stream-input",
			"POST /v1/text-to-speech/{voice_id}", "POST /v1/text-to-speech/{voice_id}/stream", "GET /v1/voices",
			"GET /v1/pipeline", "GET /", "GET /playground/{file}",
			"GET /health", "GET /ready", "GET /metrics",
		}},
		{"stage", Options{Stage: &stage}, []string{
			"POST /v1/run", "GET and DELETE /v1/requests/{id}", "GET /v1/models", "GET /health", "GET /ready", "GET /metrics",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, setup{yaml: speechYAML, opts: tc.opts})
			resp, body := f.do(context.Background(), http.MethodGet, "/nope", nil)
			wantError(t, resp, body, 404, "unknown_route", "")
			var e apijson.ErrorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatal(err)
			}
			_, list, ok := strings.Cut(e.Error.Message, "; endpoints: ")
			if got := strings.Split(list, ", "); !ok || !slices.Equal(got, tc.want) {
				t.Fatalf("the 404 lists %q; want %q", got, tc.want)
			}
			for _, ep := range tc.want {
				methods, path, _ := strings.Cut(ep, " /")
				path = strings.NewReplacer("{id}", "r1", "{file}", "playground.js", "{voice_id}", "slt").Replace("/" + path)
				for _, m := range strings.Split(methods, " and ") {
					resp, body := f.do(context.Background(), m, path, nil)
					var e apijson.ErrorBody
					if json.Unmarshal(body, &e) == nil && (e.Error.Code == "unknown_route" || e.Error.Code == "method_not_allowed") {
						t.Errorf("%s %s, listed, is answered %d %s", m, path, resp.StatusCode, e.Error.Code)
					}
				}
			}
		})
	}
}

func TestAPIKey(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{APIKey: key}})
	speech := map[string]any{"model": "tts-1", "input": "hi"}
	for _, tc := range []struct {
		name, method, path string
		body               any
		auth               string
		status             int
	}{
		{"health open", "GET", "/health", nil, "", 200},
		{"ready open", "GET", "/ready", nil, "", 200},
		{"models closed", "GET", "/v1/models", nil, "", 401},
		{"metrics closed", "GET", "/metrics", nil, "", 401},
		{"unknown route closed", "GET", "/nope", nil, "", 401},
		{"speech without key", "POST", "/v1/audio/speech", speech, "", 401},
		{"speech wrong key", "POST", "/v1/audio/speech", speech, "Bearer sk-test-0123456789abcdeX", 401},
		{"speech key prefix", "POST", "/v1/audio/speech", speech, "Bearer sk-test", 401},
		{"speech basic auth", "POST", "/v1/audio/speech", speech, "Basic " + key, 401},
		{"speech empty bearer", "POST", "/v1/audio/speech", speech, "Bearer ", 401},
		{"speech with key", "POST", "/v1/audio/speech", speech, "Bearer " + key, 200},
		{"lower-case scheme", "GET", "/v1/models", nil, "bearer " + key, 200},
		{"run with key", "POST", "/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "hi"}}, "Bearer " + key, 200},
		{"unknown route with key", "GET", "/nope", nil, "Bearer " + key, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.auth != "" {
				hdr = []string{"Authorization", tc.auth}
			}
			resp, body := f.do(context.Background(), tc.method, tc.path, tc.body, hdr...)
			if tc.status == 401 {
				wantError(t, resp, body, 401, "invalid_api_key", "API key")
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate")
				}
				return
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
		})
	}
}

func TestModels(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	var list apijson.ModelList
	resp, body := f.do(context.Background(), http.MethodGet, "/v1/models", nil)
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var ids []string
	for _, m := range list.Data {
		if m.Object != "model" || m.OwnedBy != "omnistage" || m.Created == 0 {
			t.Errorf("model %+v", m)
		}
		ids = append(ids, m.ID)
	}
	if list.Object != "list" || strings.Join(ids, ",") != "speech,tts-1,tts-1-hd,gpt-4o-mini-tts" {
		t.Errorf("list %+v", list)
	}
}

func TestMetrics(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "hi there"})
	f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "hi", "response_format": "mp4"})
	f.do(context.Background(), http.MethodGet, "/nowhere", nil)
	m := f.metricsText()
	for _, want := range []string{
		`omnistage_http_requests_total{code="200",route="speech"} 1`,
		`omnistage_http_requests_total{code="400",route="speech"} 1`,
		`omnistage_http_requests_total{code="404",route="unmatched"} 1`,
		`omnistage_http_request_duration_seconds_count{route="speech"} 2`,
		`omnistage_http_time_to_first_byte_seconds_count{route="speech"} 2`,
		`omnistage_http_requests_inflight 1`, // this scrape
		`omnistage_requests_total{outcome="ok"} 1`,
		`omnistage_stage_bindings{stage="1"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// runServer runs s on a loopback listener until the returned stop is
// called; stop returns Run's error.
func runServer(t *testing.T, s *Server) (url string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	var once atomic.Bool
	var runErr error
	stop = func() error {
		if once.CompareAndSwap(false, true) {
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + ln.Addr().String(), stop
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// newRunFixture builds a server that Run will start: the orchestrator is
// cold, and Run shuts it down.
func newRunFixture(t *testing.T, s setup) *Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := newOrchestrator(t, s, reg)
	s.opts.Registry = reg
	if s.opts.Logger == nil {
		s.opts.Logger = testLogger(t)
	}
	srv, err := New([]*orchestrator.Orchestrator{o}, s.opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func testClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestReadiness(t *testing.T) {
	warm := make(chan struct{})
	srv := newRunFixture(t, setup{yaml: speechYAML, fakes: &fakeHooks{warm: func(name string) error {
		if name == "test-synth" {
			<-warm
		}
		return nil
	}}})
	url, stop := runServer(t, srv)
	c := testClient(t)
	testkit.Eventually(t, "the server to listen", func() bool { code, _ := get(t, c, url+"/health"); return code == 200 })
	if code, body := get(t, c, url+"/ready"); code != 503 || !strings.Contains(body, "warming up") {
		t.Errorf("/ready while warming: %d %s", code, body)
	}
	resp, err := c.Post(url+"/v1/generate", "application/json", strings.NewReader(`{"input":"too early"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp, b, 503, "unavailable", "not ready")
	close(warm)
	testkit.Eventually(t, "/ready", func() bool { code, _ := get(t, c, url+"/ready"); return code == 200 })
	if code, body := get(t, c, url+"/health"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/health: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if code, _ := get(t, c, url+"/health"); code != 0 {
		t.Errorf("still serving after stop: %d", code)
	}
}

// TestGracefulShutdown stops a server while a stream is in flight: the
// stream completes, /ready turns 503 at once, and Run returns nil.
func TestGracefulShutdown(t *testing.T) {
	g := newGate()
	reached := make(chan struct{}, 1)
	srv := newRunFixture(t, setup{yaml: speechYAML, fakes: &fakeHooks{chunk: func(ctx context.Context, name string, n int) error {
		if name == "test-synth" && n == 1 {
			reached <- struct{}{}
			return g.wait(ctx)
		}
		return nil
	}}})
	url, stop := runServer(t, srv)
	c := testClient(t)
	testkit.Eventually(t, "/ready", func() bool { code, _ := get(t, c, url+"/ready"); return code == 200 })
	resp, err := c.Post(url+"/v1/audio/speech", "application/json", strings.NewReader(`{"model":"tts-1","input":"`+hello+`","stream_format":"audio","response_format":"wav"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-reached
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	testkit.Eventually(t, "draining", func() bool { return srv.draining.Load() })
	select {
	case err := <-stopped:
		t.Fatalf("Run returned %v with a stream in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.open()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := 44 + 2*len(expectedSpeech(hello, "slt", 1)); len(body) != want {
		t.Errorf("stream of %d bytes, want %d", len(body), want)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestShutdownTimeout stops a server whose stream never ends: after the
// shutdown timeout the request is aborted and Run returns.
func TestShutdownTimeout(t *testing.T) {
	reached := make(chan struct{}, 1)
	srv := newRunFixture(t, setup{yaml: speechYAML, opts: Options{ShutdownTimeout: 100 * time.Millisecond}, fakes: &fakeHooks{chunk: func(ctx context.Context, name string, n int) error {
		if name == "test-synth" && n == 1 {
			reached <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}})
	url, stop := runServer(t, srv)
	c := testClient(t)
	testkit.Eventually(t, "/ready", func() bool { code, _ := get(t, c, url+"/ready"); return code == 200 })
	resp, err := c.Post(url+"/v1/generate", "application/json", strings.NewReader(`{"input":"`+hello+`","stream":"ndjson"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-reached
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop took %v", d)
	}
	body, _ := io.ReadAll(resp.Body)
	lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
	var last apijson.Event
	_ = json.Unmarshal(lines[len(lines)-1], &last)
	if last.Type != apijson.EventError || last.Error == nil || last.Error.Code != "unavailable" {
		t.Errorf("stream ended with %s", lines[len(lines)-1])
	}
}

func TestWarmFailure(t *testing.T) {
	srv := newRunFixture(t, setup{yaml: speechYAML, fakes: &fakeHooks{warm: func(name string) error {
		if name == "test-align" {
			return fmt.Errorf("no acoustic model")
		}
		return nil
	}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Run(context.Background(), ln)
	if err == nil || !strings.Contains(err.Error(), "no acoustic model") {
		t.Errorf("Run: %v", err)
	}
}

func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(ln, 1)
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	c1, _ := net.Dial("tcp", ln.Addr().String())
	c2, _ := net.Dial("tcp", ln.Addr().String())
	defer c1.Close()
	defer c2.Close()
	first := <-accepted
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted while the first is open")
	case <-time.After(50 * time.Millisecond):
	}
	first.Close()
	second := <-accepted
	second.Close()
	l.Close()
	for range accepted {
	}
}

// TestCORS checks that a configured origin's pages may call the API and
// read its headers, and that without configuration no CORS header is sent.
func TestCORS(t *testing.T) {
	const origin = "https://app.example.com"
	preflight := func(f *fixture, from string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, f.url+"/v1/audio/speech", nil)
		req.Header.Set("Origin", from)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,traceparent") // as browsers send it
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{CORSOrigins: []string{origin}}})
	if resp := preflight(f, origin); resp.Header.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "traceparent") {
		t.Errorf("preflight from %s: status %d, headers %v", origin, resp.StatusCode, resp.Header)
	}
	if resp := preflight(f, "https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin allowed: %v", resp.Header)
	}
	resp, _ := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "hi", "response_format": "pcm"}, "Origin", origin)
	if resp.Header.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Sample-Rate") {
		t.Errorf("POST from %s: headers %v", origin, resp.Header)
	}

	plain := newFixture(t, setup{yaml: speechYAML})
	if resp := preflight(plain, origin); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS headers without configuration: %v", resp.Header)
	}
}

// TestIdleConnectionsDoNotLockOut fills every connection slot with
// keep-alive connections left idle after a request, and with sockets that
// send nothing, and checks that a new client is still served: the
// connection idle (or silent) the longest gives up its slot.
func TestIdleConnectionsDoNotLockOut(t *testing.T) {
	const maxConns = 4
	url := runOnLoopback(t, Options{MaxConns: maxConns})
	addr := strings.TrimPrefix(url, "http://")
	get := func(c *http.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	// Keep-alive clients, each left holding an idle connection.
	for range maxConns {
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		if err := get(c); err != nil {
			t.Fatal(err)
		}
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if err := get(fresh); err != nil {
		t.Fatalf("a new client with every slot held by idle keep-alive connections: %v", err)
	}
	// Sockets that connect and send nothing.
	for range maxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for range 3 {
		if err := get(fresh); err != nil {
			t.Fatalf("a new client with every slot held by silent sockets: %v", err)
		}
	}
}

// TestCrossSite checks what a page on another site could send a browser
// to a server on 127.0.0.1: a POST without JSON's content type (415), an
// Origin not allowed (403), and a Host that is none of the server's names
// (403, DNS rebinding), each refused with a message; and that programs,
// the server's own page, configured origins and allowed hosts pass.
func TestCrossSite(t *testing.T) {
	opts := Options{CORSOrigins: []string{"https://app.example.com"}, AllowedHosts: []string{"Stages.Internal.", "*.svc.cluster.local"}}
	t.Run("loopback", func(t *testing.T) { testCrossSite(t, runOnLoopback(t, opts)) })
	// A server on every address (or a LAN one) is as reachable by a
	// rebound name.
	t.Run("every address", func(t *testing.T) { testCrossSite(t, runOn(t, "0.0.0.0:0", opts)) })
}

func testCrossSite(t *testing.T, url string) {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	body := `{"model": "tts-1", "input": "hi", "response_format": "pcm"}`
	for _, tc := range []struct {
		name        string
		contentType string
		hdr         []string // more headers
		host        string
		status      int
		code        string
	}{
		{"a program", "application/json", nil, "", 200, ""},
		{"json with a charset", "application/json; charset=utf-8", nil, "", 200, ""},
		{"localhost", "application/json", nil, "localhost:" + port, 200, ""},
		{"the server's own page", "application/json", []string{"Origin", url}, "", 200, ""},
		{"a configured origin", "application/json", []string{"Origin", "https://app.example.com"}, "", 200, ""},
		{"a configured origin's host", "application/json", nil, "app.example.com", 200, ""},
		{"a text/plain form", "text/plain", nil, "", 415, "unsupported_media_type"},
		{"no content type", "", nil, "", 415, "unsupported_media_type"},
		{"a url-encoded form", "application/x-www-form-urlencoded", nil, "", 415, "unsupported_media_type"},
		{"another origin", "application/json", []string{"Origin", "https://evil.example"}, "", 403, "forbidden_origin"},
		{"an allowed host", "application/json", nil, "stages.internal:" + port, 200, ""},
		{"a name of an allowed domain", "application/json", nil, "stage-1.omni.svc.cluster.local", 200, ""},
		{"an address", "application/json", nil, "192.0.2.7:" + port, 200, ""},
		{"an IPv6 address", "application/json", nil, "[2001:db8::1]:" + port, 200, ""},
		{"a rebound name", "application/json", nil, "evil.example:" + port, 403, "forbidden_host"},
		{"a domain's look-alike", "application/json", nil, "evilsvc.cluster.local", 403, "forbidden_host"},
		{"a rebound page of its own origin", "application/json", []string{"Origin", "http://evil.example:" + port}, "evil.example:" + port, 403, "forbidden_host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/audio/speech", strings.NewReader(body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.status != 200 {
				wantError(t, resp, data, tc.status, tc.code, "")
			} else if resp.StatusCode != 200 {
				t.Errorf("status %d: %s", resp.StatusCode, data)
			}
		})
	}
}

// TestSlowBodyAndBadIDs checks two answers of the HTTP layer: a body that
// stops arriving is a 408 in the JSON error shape without the connection's
// addresses, and a request id that is not UTF-8 is a 400.
func TestSlowBodyAndBadIDs(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{BodyReadTimeout: 200 * time.Millisecond}})
	c, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testkit.Timeout)) // a server that never answers fails the test
	fmt.Fprintf(c, "POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\"")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp, body, http.StatusRequestTimeout, "body_timeout", "did not arrive in time")
	if strings.Contains(string(body), "127.0.0.1") {
		t.Errorf("the answer names addresses: %s", body)
	}

	resp2, body2 := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "hi"}, "X-Request-Id", "id-\xff")
	wantError(t, resp2, body2, 400, "bad_request", "not valid UTF-8")
}

// runOnLoopback runs a server of speechYAML with opts through Run (its
// listener, its connection limit, its loopback checks) on 127.0.0.1, and
// returns its URL once ready. It stops when the test ends.
func runOnLoopback(t *testing.T, opts Options) string {
	t.Helper()
	return runOn(t, "127.0.0.1:0", opts)
}

// runOn is runOnLoopback listening on addr; the URL it returns is on
// 127.0.0.1 whatever addr's host.
func runOn(t *testing.T, addr string, opts Options) string {
	t.Helper()
	opts.ShutdownTimeout = 5 * time.Second
	srv, err := New([]*orchestrator.Orchestrator{newOrchestrator(t, setup{yaml: speechYAML}, prometheus.NewRegistry())}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	ready := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	testkit.Eventually(t, "the server ready", func() bool {
		resp, err := ready.Get(url + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}
