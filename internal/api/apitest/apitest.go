// Package apitest helps tests outside the api package run the HTTP API: a
// real server over an orchestrator, on an ephemeral loopback port, for the
// length of a test.
package apitest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// Server is a running server.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:PORT".
	URL string
	// Orch is the server's orchestrator.
	Orch *orchestrator.Orchestrator

	stop    context.CancelFunc
	done    chan error
	stopped bool
}

// Start runs the API over a new orchestrator for cfg (built with orch,
// started by the server) with opts, and returns once /ready answers. The
// server stops when the test ends, or on Stop; its error fails the test.
func Start(t testing.TB, cfg *pipeline.Config, orch orchestrator.Options, opts api.Options) *Server {
	t.Helper()
	o, err := orchestrator.New(cfg, orch)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	srv, err := api.New([]*orchestrator.Orchestrator{o}, opts)
	if err != nil {
		_ = o.Shutdown(context.Background())
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = o.Shutdown(context.Background())
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{URL: "http://" + ln.Addr().String(), Orch: o, stop: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() { s.Stop(t) })
	c := &hop.Client{APIKey: opts.APIKey}
	deadline := time.Now().Add(2 * time.Minute)
	for c.Probe(ctx, s.URL, "/ready") != nil {
		if time.Now().After(deadline) {
			t.Fatal("server not ready after 2 minutes")
		}
		select {
		case err := <-s.done:
			s.stopped = true
			t.Fatalf("server stopped while starting: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	c.CloseIdleConnections()
	return s
}

// Handler serves h on an ephemeral loopback port for the length of the
// test, over HTTP/1.1 and h2c as omnistage servers do, and returns its
// base URL: a fake stage server.
func Handler(t testing.TB, h http.Handler) string {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s.URL
}

// Stop stops the server and waits for it; its error fails the test. A
// second Stop does nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	s.stop()
	if err := <-s.done; err != nil {
		t.Errorf("server %s: %v", s.URL, err)
	}
}
