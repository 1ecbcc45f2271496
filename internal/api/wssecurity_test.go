package api

// Who may open a speech stream session: the API key (a bearer header, or
// a subprotocol for browsers), the cross-site checks of every route, the
// handshake itself; and the end of sessions at a server's shutdown.

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// keyProtocol is the subprotocol that carries key.
func keyProtocol(key string) string {
	return WSKeyProtocol + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// TestSpeechStreamAccess: the handshake is refused, in the API's error
// shape, without the right key (as a bearer header or a subprotocol, the
// latter only beside the omnistage subprotocol), from another site's page,
// under a rebound host name, and when it is no WebSocket handshake.
func TestSpeechStreamAccess(t *testing.T) {
	const key = "sk-stream-0123456789"
	f := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil), opts: Options{APIKey: key, CORSOrigins: []string{"https://app.example.com"}}})
	ok := func(name string, opts *websocket.DialOptions, protocol string) {
		t.Run(name, func(t *testing.T) {
			c := dialWS(t, f.url, opts)
			if got := c.conn.Subprotocol(); got != protocol {
				t.Errorf("subprotocol %q, want %q", got, protocol)
			}
			c.event(evConfig, "response_format", "pcm")
			c.event(evText, "text", "Let me in.")
			c.event(evDone)
			if h := c.utterance(); h.end.typ != evSessionDone {
				t.Errorf("ended with %s", h.end.raw)
			}
		})
	}
	ok("bearer header", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}}, "")
	ok("key subprotocol", &websocket.DialOptions{Subprotocols: []string{WSProtocol, keyProtocol(key)}}, WSProtocol)
	ok("own origin", &websocket.DialOptions{Subprotocols: []string{WSProtocol, keyProtocol(key)}, HTTPHeader: http.Header{"Origin": {f.url}}}, WSProtocol)
	ok("allowed origin", &websocket.DialOptions{Subprotocols: []string{WSProtocol, keyProtocol(key)}, HTTPHeader: http.Header{"Origin": {"https://app.example.com"}}}, WSProtocol)

	auth := "Bearer " + key
	for _, tc := range []refusal{
		{name: "no key", hdr: []string{}, status: 401, code: "invalid_api_key", msg: "missing API key"},
		{name: "wrong key", hdr: []string{"Authorization", "Bearer sk-no"}, status: 401, code: "invalid_api_key", msg: "incorrect API key"},
		{name: "wrong key subprotocol", hdr: []string{"Sec-WebSocket-Protocol", WSProtocol + ", " + keyProtocol("sk-no")}, status: 401, code: "invalid_api_key", msg: "incorrect API key"},
		{name: "empty key subprotocol", hdr: []string{"Sec-WebSocket-Protocol", WSProtocol + ", " + WSKeyProtocol}, status: 401, code: "invalid_api_key", msg: "holds no key"},
		{name: "key subprotocol alone", hdr: []string{"Sec-WebSocket-Protocol", keyProtocol(key)}, status: 400, code: "bad_request", msg: `must also offer the subprotocol "omnistage"`},
		{name: "another site's page, not a handshake", hdr: []string{"Authorization", auth, "Origin", "https://evil.example", "Upgrade", ""}, status: 403, code: "forbidden_origin", msg: "may not call this server"},
		{name: "a rebound host", hdr: []string{"Authorization", auth, "Host", "rebound.example:80"}, status: 403, code: "forbidden_host", msg: "not one this server answers to"},
		{name: "not a WebSocket", hdr: []string{"Authorization", auth, "Upgrade", "", "Connection", ""}, status: 426, code: "websocket_required", msg: "is a WebSocket endpoint"},
		{name: "another version", hdr: []string{"Authorization", auth, "Sec-WebSocket-Version", "8"}, status: 400, code: "bad_request", msg: "only version 13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := append([]string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}, tc.hdr...)
			resp, body := f.doHost(http.MethodGet, speechStreamPath, hdr...)
			wantError(t, resp, body, tc.status, tc.code, tc.msg)
		})
	}
	resp, body := f.do(context.Background(), http.MethodPost, speechStreamPath, "{}", "Authorization", auth)
	wantError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")

	// A browser's refused handshake (it sends an Origin) is completed and
	// closed at once, its reason in the close (a browser hides a refused
	// handshake's answer from the page); nothing is served on it.
	for _, tc := range []struct {
		name   string
		opts   *websocket.DialOptions
		reason string
	}{
		{"another site's page", &websocket.DialOptions{Subprotocols: []string{WSProtocol, keyProtocol(key)}, HTTPHeader: http.Header{"Origin": {"https://evil.example"}}},
			`forbidden_origin: origin "https://evil.example" may not call this server: add it to serve --cors-origins`},
		{"a page without the key", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://app.example.com"}}}, "invalid_api_key: missing API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tryDialWS(f.url, tc.opts)
			if err != nil {
				t.Fatalf("the handshake: %v", err)
			}
			defer conn.CloseNow()
			ctx, cancel := context.WithTimeout(context.Background(), wsDeadline)
			defer cancel()
			_, _, err = conn.Read(ctx)
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.HasPrefix(ce.Reason, tc.reason) {
				t.Errorf("closed with %v, want 1008 and %q", err, tc.reason)
			}
		})
	}
}

// doHost sends a request whose headers are hdr (name, value pairs; an
// empty value drops the header, Host sets the request's host) and returns
// the answer and its body.
func (f *fixture) doHost(method, path string, hdr ...string) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		switch {
		case hdr[i] == "Host":
			req.Host = hdr[i+1]
		case hdr[i+1] == "":
			req.Header.Del(hdr[i])
		default:
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 0, 512)
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			break
		}
	}
	return resp, b
}

// TestSpeechStreamShutdown: a server that stops ends its sessions at once
// (their utterances cancelled, then an error event and status 1001), and
// Run waits for them; a handshake while it stops is refused.
func TestSpeechStreamShutdown(t *testing.T) {
	hook, open := gateAfter(2)
	defer open()
	srv := newRunFixture(t, setup{yaml: liveYAML, engines: liveEngines(&liveHooks{block: hook})})
	url, stop := runServer(t, srv)
	waitReady(t, url)
	c := dialWS(t, url, nil)
	c.event(evConfig, "response_format", "pcm", "stream_audio", true)
	c.event(evText, "text", "A sentence the server stops in the middle of.")
	c.event(evDone)
	read := c.until(evAudioStart)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	h := c.utterance(read...)
	if h.end.typ != evCancelled {
		t.Fatalf("the utterance ended with %s, want audio.cancelled", h.end.raw)
	}
	wantErrorEvent(t, c.recv(), "not_ready", "shutting down")
	if s := c.closed(); s != websocket.StatusGoingAway {
		t.Errorf("closed with %d, want 1001", s)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(wsDeadline):
		t.Fatal("Run did not return")
	}
}

// waitReady polls url's /ready until it answers 200.
func waitReady(t *testing.T, url string) {
	t.Helper()
	start := time.Now()
	for {
		if code, _ := get(t, http.DefaultClient, url+"/ready"); code == http.StatusOK {
			return
		}
		if time.Since(start) > wsDeadline {
			t.Fatal("not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
