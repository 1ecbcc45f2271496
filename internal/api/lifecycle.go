package api

// The server's lifecycle: Run serves, warms the pipeline and stops in a
// written order, under a bound on the connections open at once.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// abortGrace is how long Run lets the handlers of aborted requests finish
// their responses before it closes their connections.
const abortGrace = 2 * time.Second

// Run serves the API on ln, warms the pipeline (Start; /ready answers 503
// until it returns), and serves until ctx ends. Then it stops, in this
// order:
//
//  1. /ready answers 503, so load balancers stop sending requests;
//  2. the listener closes and idle connections are closed, while requests
//     in flight (streams included) run to their end, for at most
//     ShutdownTimeout; speech stream sessions (WebSockets) are told to
//     end at once (their utterances cancelled) and waited for;
//  3. the orchestrator shuts down: requests still running are aborted and
//     their stages drained, then every engine is closed;
//  4. the aborted requests' handlers end their responses (for at most
//     abortGrace), then connections still open are closed.
//
// Run returns nil after a stop caused by ctx, or the error that stopped it
// (the pipeline failed to warm, the listener failed). It closes ln.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	limited := newLimitListener(ln, s.opts.MaxConns)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ownedBy(r)
			if r.ProtoMajor == 1 && limited.nearLimit() {
				// A connection kept alive now would be the next to go:
				// its client's next request must open a new one.
				w.Header().Set("Connection", "close")
			}
			s.handler.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// No ReadTimeout or WriteTimeout: either would cut long streams.
		// Bodies are read under BodyReadTimeout and each write is bounded
		// by ChunkWriteTimeout, per request.
		Protocols: serverProtocols(),
	}
	// Connections are bounded (limitListener), and net/http's own answers
	// on them are in the JSON error shape (answerConn).
	answering := &answerListener{Listener: limited, answered: s.answeredEarly, headerTimeout: s.opts.ReadHeaderTimeout}
	hs.ConnState = func(c net.Conn, state http.ConnState) {
		if ac, ok := c.(*answerConn); ok {
			ac.track(state)
			c = ac.Conn
		}
		limited.track(c, state)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(answering) }()
	s.log.Info("http server listening", "addr", ln.Addr().String(), "pipelines", s.pipelineNames(), "stage", s.stageAttr())

	var runErr error
	if err := s.start(ctx); err != nil {
		if ctx.Err() == nil {
			runErr = err
		}
	} else {
		select {
		case <-ctx.Done():
		case err := <-served:
			served <- err
			runErr = fmt.Errorf("api: serve: %w", err)
		}
	}

	s.draining.Store(true)
	s.log.Info("shutting down", "timeout", s.opts.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	drained := hs.Shutdown(sctx) == nil
	drained = s.sessions.Drain(sctx) && drained
	if !drained {
		s.log.Warn("requests still running at the shutdown timeout; aborting them")
	}
	if err := s.shutdownPipelines(sctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if !drained {
		// The aborted requests' handlers now end their responses (an
		// error event, a trailer); give them a moment to do so.
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), abortGrace)
		_ = hs.Shutdown(gctx)
		gcancel()
	}
	_ = hs.Close()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		runErr = fmt.Errorf("api: serve: %w", err)
	}
	s.log.Info("stopped")
	return runErr
}

// serverProtocols are HTTP/1.1 and HTTP/2 without TLS (h2c, with prior
// knowledge), which streamed hops use (see package hop); over TLS, a proxy
// in front speaks whatever its clients do.
func serverProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

func (s *Server) stageAttr() slog.Value {
	if s.opts.Stage == nil {
		return slog.StringValue("all")
	}
	return slog.IntValue(*s.opts.Stage)
}

// pipelineNames lists the pipelines served, for log lines.
func (s *Server) pipelineNames() []string {
	names := make([]string, len(s.pipelines))
	for i, p := range s.pipelines {
		names[i] = p.name
	}
	return names
}

// start warms every pipeline at once. A pipeline that fails to start fails
// the server, unless Options.StartPartial: then it answers 503 and /ready
// names it, and the others serve (Run fails only when none starts).
func (s *Server) start(ctx context.Context) error {
	errs := make([]error, len(s.pipelines))
	var wg sync.WaitGroup
	for i, p := range s.pipelines {
		wg.Go(func() { errs[i] = p.orch.Start(ctx) })
	}
	wg.Wait()
	var failed []error
	for i, p := range s.pipelines {
		if err := errs[i]; err != nil {
			err = fmt.Errorf("pipeline %s: %w", p.name, err)
			failed = append(failed, err)
			p.startErr.Store(&err)
			s.log.Error("pipeline failed to start", "pipeline", p.name, "err", err)
		}
	}
	switch {
	case len(failed) == 0:
		return nil
	case s.opts.StartPartial && len(failed) < len(s.pipelines):
		return nil
	}
	return fmt.Errorf("api: %w", errors.Join(failed...))
}

// shutdownPipelines shuts every pipeline down at once (see
// orchestrator.Shutdown).
func (s *Server) shutdownPipelines(ctx context.Context) error {
	errs := make([]error, len(s.pipelines))
	var wg sync.WaitGroup
	for i, p := range s.pipelines {
		wg.Go(func() {
			if err := p.orch.Shutdown(ctx); err != nil {
				s.log.Error("pipeline shutdown", "pipeline", p.name, "err", err)
				errs[i] = fmt.Errorf("api: pipeline %s: %w", p.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
