package api

// The connections Run serves: net/http's own refusals (headers too large,
// malformed, late) answered in the JSON error shape, and the buffered
// response writer that renders such answers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/stageserver"
)

// MaxHeaderBytes bounds a request's line and headers (net/http allows 4 KiB
// of slack past it); past it, the answer is a 431 headers_too_large.
const MaxHeaderBytes = 64 << 10

// answerWriteTimeout bounds writing one of answerConn's answers: a client
// that does not read cannot hold the connection with it.
const answerWriteTimeout = 5 * time.Second

// answerConn is a connection as Run serves it: it puts in the JSON error
// shape the answers that net/http gives by itself, to requests that never
// reach a handler. net/http writes those straight onto the connection in
// text/plain (431 for a request line and headers past MaxHeaderBytes; 400
// for a malformed request line, header or Host; 505 for an HTTP version it
// does not serve; 501 for a transfer coding other than chunked; 417 for an
// Expect other than 100-continue), and closes a connection whose headers
// do not arrive within the read-header timeout without a word. Why at the
// connection, and how it stays out of every other answer's way:
//
//   - net/http writes these answers only while no handler owns the
//     connection: after a request's headers failed to parse, or (417)
//     before any handler was called. answerConn knows when a handler owns
//     it, from the time Run's handler starts until net/http reports the
//     connection idle or new again (http.Server.ConnState); so the end of a
//     response that net/http flushes after the handler returned is never
//     taken for one of them. Everything written while a handler owns the
//     connection passes as it is, and so does an HTTP/2 connection, owned
//     for good from its first request (its frames never begin like an
//     HTTP/1.1 answer anyway).
//   - A write that begins with "HTTP/1.1 4" or "HTTP/1.1 5" while no
//     handler owns the connection is net/http's answer (one Write today).
//     answerConn takes only its status (and, for a 400, net/http's own
//     fixed reason: "missing required Host header") and writes its answer
//     instead, with Connection: close, as net/http closes the connection
//     after it; whatever net/http writes after that is dropped. So a change
//     of net/http's wording cannot break the JSON, and a status it adds
//     still gets the JSON shape.
//   - The read-header timeout shows as a read that times out while no
//     handler owns the connection. If some of a request had arrived,
//     answerConn answers 408 header_timeout before net/http closes. A
//     connection that sent nothing since it opened or since its last
//     response gets no answer: a browser may keep such a connection to
//     send its next request on, and would take a 408 there for that
//     request's answer.
//
// The alternatives are weaker: checking the header size ourselves needs an
// HTTP parser in front of net/http's (and the other refusals stay
// net/http's), and no handler ever sees these requests.
type answerConn struct {
	net.Conn
	// answered reports each answer written: its status and code.
	answered func(remote net.Addr, status int, code string)
	// headerTimeout is the read-header timeout, for the 408's message.
	headerTimeout time.Duration

	mu       sync.Mutex
	owned    bool // a handler started since the connection was new or idle
	http2    bool // the connection speaks HTTP/2: never answered here
	received bool // bytes of a request arrived while not owned
	done     bool // an answer was written; net/http closes the connection
}

// answerListener serves its connections through answerConns.
type answerListener struct {
	net.Listener
	answered      func(remote net.Addr, status int, code string)
	headerTimeout time.Duration
}

// Accept implements net.Listener.
func (l *answerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &answerConn{Conn: c, answered: l.answered, headerTimeout: l.headerTimeout}, nil
}

type answerConnKey struct{}

// connContext is http.Server.ConnContext: it lets a request's handler
// reach its answerConn (ownedBy), and a streamed hop its connection (see
// stageserver.WithConn).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if ac, ok := c.(*answerConn); ok {
		ctx = context.WithValue(ctx, answerConnKey{}, ac)
	}
	return stageserver.WithConn(ctx, netConn(c))
}

// netConn returns the network connection under Run's wrappers of it.
func netConn(c net.Conn) net.Conn {
	if ac, ok := c.(*answerConn); ok {
		c = ac.Conn
	}
	if lc, ok := c.(*limitConn); ok {
		c = lc.Conn
	}
	return c
}

// ownedBy tells r's answerConn, if any, that a handler owns it.
func ownedBy(r *http.Request) {
	ac, ok := r.Context().Value(answerConnKey{}).(*answerConn)
	if !ok {
		return
	}
	ac.mu.Lock()
	ac.owned = true
	ac.http2 = ac.http2 || r.ProtoMajor >= 2
	ac.mu.Unlock()
}

// track is the answerConn's part of http.Server.ConnState: a new or idle
// connection is owned by no handler, and waits for a request.
func (c *answerConn) track(state http.ConnState) {
	if state != http.StateNew && state != http.StateIdle {
		return
	}
	c.mu.Lock()
	c.owned, c.received = c.http2, false
	c.mu.Unlock()
}

// Read implements net.Conn: it answers 408 when the rest of a request's
// headers did not arrive in time.
func (c *answerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned {
		return n, err
	}
	if n > 0 {
		c.received = true
	}
	var ne net.Error
	if err != nil && c.received && !c.done && errors.As(err, &ne) && ne.Timeout() {
		c.answer(httperr.Errorf(http.StatusRequestTimeout, httperr.CodeHeaderTimeout,
			"the request line and headers did not arrive within %s: send them at once", c.headerTimeout))
	}
	return n, err
}

// Write implements net.Conn: it writes net/http's own error answers in
// the JSON error shape.
func (c *answerConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.owned || (!c.done && !isErrorAnswer(p)) {
		c.mu.Unlock()
		return c.Conn.Write(p)
	}
	defer c.mu.Unlock()
	if !c.done {
		c.answer(netHTTPAnswer(p))
	}
	return len(p), nil
}

// CloseWrite lets net/http half-close the connection, as it does without
// the wrapper.
func (c *answerConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// answer writes err as a whole response that closes the connection. The
// caller holds c.mu.
func (c *answerConn) answer(err *httperr.Error) {
	c.done = true
	_ = c.Conn.SetWriteDeadline(time.Now().Add(answerWriteTimeout))
	_, _ = c.Conn.Write(rawAnswer(err))
	c.answered(c.RemoteAddr(), err.Status, err.Code)
}

// answeredEarly counts and logs an answer a connection got before any
// handler ran (answerConn), under the route label of unmatched requests.
func (s *Server) answeredEarly(remote net.Addr, status int, code string) {
	s.metrics.requests.WithLabelValues(routeUnmatched, strconv.Itoa(status)).Inc()
	ctx := context.Background()
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.LogAttrs(ctx, slog.LevelDebug, "request refused before a handler", slog.Int("status", status), slog.String("code", code), slog.String("remote", remote.String()))
	}
}

// isErrorAnswer reports whether p starts an HTTP/1.1 answer with a 4xx or
// 5xx status.
func isErrorAnswer(p []byte) bool {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	return ok && len(rest) > 0 && (rest[0] == '4' || rest[0] == '5')
}

// netHTTPAnswer is the JSON answer to a request that net/http refused with
// the answer p.
func netHTTPAnswer(p []byte) *httperr.Error {
	line, _, _ := bytes.Cut(p, []byte("\r\n"))
	fields := strings.Fields(string(line))
	status := http.StatusBadRequest
	if len(fields) > 1 {
		if n, err := strconv.Atoi(fields[1]); err == nil {
			status = n
		}
	}
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return httperr.Errorf(http.StatusRequestHeaderFieldsTooLarge, httperr.CodeHeadersTooLarge,
			"the request line and headers are larger than this server's limit of %d bytes", MaxHeaderBytes)
	case http.StatusExpectationFailed:
		return httperr.Errorf(http.StatusExpectationFailed, httperr.CodeExpectationFailed,
			"the Expect header can only be 100-continue: send the request without it")
	case http.StatusNotImplemented:
		return httperr.Errorf(http.StatusNotImplemented, httperr.CodeUnsupportedEncoding,
			"unsupported Transfer-Encoding: send the body with a Content-Length, or chunked")
	case http.StatusHTTPVersionNotSupported:
		return httperr.Errorf(http.StatusHTTPVersionNotSupported, httperr.CodeUnsupportedVersion,
			"unsupported HTTP version: send HTTP/1.1, or HTTP/2 with prior knowledge")
	}
	msg := "malformed HTTP request: the request line or a header could not be parsed"
	// A 400's body is net/http's "400 Bad Request: reason", its own words.
	if _, body, ok := bytes.Cut(p, []byte("\r\n\r\n")); ok {
		if _, reason, ok := strings.Cut(string(body), ": "); ok && reason != "" {
			msg = "malformed HTTP request: " + reason
		}
	}
	return httperr.Errorf(status, string(orchestrator.CodeBadRequest), "%s", msg)
}

// rawAnswer is err written by httperr as a whole HTTP/1.1 response that
// closes the connection.
func rawAnswer(err *httperr.Error) []byte {
	var w bufferedResponse
	httperr.WriteError(&w, err)
	resp := &http.Response{
		StatusCode: w.status, ProtoMajor: 1, ProtoMinor: 1, Header: w.Header(),
		ContentLength: int64(w.body.Len()), Body: io.NopCloser(&w.body), Close: true,
	}
	var b bytes.Buffer
	if err := resp.Write(&b); err != nil {
		panic(fmt.Sprintf("api: writing an answer to a buffer: %v", err)) // a bytes.Buffer does not fail
	}
	return b.Bytes()
}

// bufferedResponse is an http.ResponseWriter that keeps what it is given.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedResponse) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *bufferedResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferedResponse) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
