package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"
)

// rawConn is a client connection that sends requests as raw bytes.
type rawConn struct {
	t *testing.T
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A server that never answers fails the test instead of hanging it.
	_ = c.SetDeadline(time.Now().Add(testkit.Timeout))
	return &rawConn{t: t, Conn: c, r: bufio.NewReader(c)}
}

// answer reads one response and its body.
func (c *rawConn) answer() (*http.Response, []byte) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, body
}

// exchange sends raw and reads the answer.
func (c *rawConn) exchange(raw string) (*http.Response, []byte) {
	c.t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		c.t.Fatal(err)
	}
	return c.answer()
}

// closed checks that the server closed the connection after its answer.
func (c *rawConn) closed() {
	c.t.Helper()
	if b, err := c.r.ReadByte(); !errors.Is(err, io.EOF) {
		c.t.Errorf("the connection is still open after the answer: read %q, %v", b, err)
	}
}

// TestNetHTTPAnswers sends a server under Run, over raw TCP, the requests
// that net/http or ServeMux answer themselves before any route's handler
// runs, and checks that each is answered in the JSON error shape with a
// fitting status and code.
func TestNetHTTPAnswers(t *testing.T) {
	url := runOnLoopback(t, Options{ReadHeaderTimeout: 100 * time.Millisecond})
	for _, tc := range []struct {
		name   string
		raw    string
		status int
		code   string
		msg    string
		closes bool // net/http closes the connection after it
	}{
		{"malformed request line", "THIS IS NOT HTTP AT ALL\r\n\r\n", 400, "bad_request", "malformed HTTP request", true},
		{"no Host", "GET /health HTTP/1.1\r\n\r\n", 400, "bad_request", "malformed HTTP request: missing required Host header", true},
		{"malformed Host", "GET /health HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "bad_request", "malformed Host header", true},
		{"bad header name", "GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header: v\r\n\r\n", 400, "bad_request", "invalid header name", true},
		{"bad escape", "GET /%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad_request", "malformed HTTP request", true},
		{"HTTP/2.0 request line", "GET /health HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, "unsupported_http_version", "send HTTP/1.1", true},
		{"Expect", "GET /health HTTP/1.1\r\nHost: localhost\r\nExpect: magic\r\n\r\n", 417, "expectation_failed", "100-continue", true},
		{"transfer coding", "POST /v1/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "unsupported_transfer_encoding", "Content-Length, or chunked", true},
		{"header timeout", "GET /health HTTP/1.1\r\nHost: localhost\r\n", 408, "header_timeout", "did not arrive within 100ms", true},
		{"double slash", "GET /v1//models HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, "unknown_route", "only in their canonical form, here /v1/models", false},
		{"dot segment", "POST /v1/../v1/generate?x=1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 404, "unknown_route", "here /v1/generate?x=1", false},
		{"target *", "POST * HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 400, "bad_request", "names no endpoint", false},
		{"CONNECT", "CONNECT localhost:80 HTTP/1.1\r\nHost: localhost:80\r\n\r\n", 404, "unknown_route", "no endpoint CONNECT", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, url)
			resp, body := c.exchange(tc.raw)
			wantError(t, resp, body, tc.status, tc.code, tc.msg)
			if tc.closes {
				if !resp.Close {
					t.Error("no Connection: close")
				}
				c.closed()
			}
		})
	}

	t.Run("headers too large", func(t *testing.T) {
		c := dialRaw(t, url)
		// net/http stops reading past the limit and answers: write the rest
		// aside, so that a full socket buffer cannot stall the test.
		wrote := make(chan error, 1)
		go func() {
			_, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: "+strings.Repeat("a", 2*MaxHeaderBytes)+"\r\n\r\n")
			wrote <- err
		}()
		resp, body := c.answer()
		wantError(t, resp, body, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large", "limit of 65536 bytes")
		c.Close()
		<-wrote
	})

	t.Run("silent socket", func(t *testing.T) {
		// A connection that sends nothing is closed at the header timeout
		// without an answer (a browser's spare connection must not read a
		// 408 as the answer of the request it sends later).
		c := dialRaw(t, url)
		c.closed()
	})

	t.Run("keep-alive", func(t *testing.T) {
		// After an answered request, the next one on the connection is
		// again net/http's to refuse; and an answer a handler writes,
		// error or not, passes as it is.
		for _, tc := range []struct {
			raw    string
			status int
			code   string
		}{
			{"GET /health HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "bad_request"},
			{"GET /health HTTP/1.1\r\nHost: localhost\r\n", 408, "header_timeout"},
		} {
			c := dialRaw(t, url)
			resp, body := c.exchange("POST /v1/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
			wantError(t, resp, body, 400, "bad_request", "input is missing")
			if resp, body := c.exchange("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
				t.Fatalf("second request: %d %s", resp.StatusCode, body)
			}
			resp, body = c.exchange(tc.raw)
			wantError(t, resp, body, tc.status, tc.code, "")
			c.closed()
		}
	})

	// The answers are counted as unmatched requests.
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`omnistage_http_requests_total{code="400",route="unmatched"} 7`,
		`omnistage_http_requests_total{code="408",route="unmatched"} 2`,
		`omnistage_http_requests_total{code="431",route="unmatched"} 1`,
		`omnistage_http_requests_total{code="505",route="unmatched"} 1`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(string(m), "omnistage_http_requests_total"))
		}
	}
}

// TestAnswerConnPassesHandlers checks that what a handler writes on a
// connection under Run passes unchanged, streamed answers included.
func TestAnswerConnPassesHandlers(t *testing.T) {
	url := runOnLoopback(t, Options{})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/generate", strings.NewReader(`{"input": "hello there", "stream": "ndjson"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if evs := readEvents(t, body, false); resp.StatusCode != 200 || len(evs) == 0 || evs[len(evs)-1].Type != "done" {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}
