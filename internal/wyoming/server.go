package wyoming

// The server: its options, the connections it accepts within a bound, and
// its stop, in a written order.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/defaults"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/sessions"
)

// Defaults of Options.
const (
	DefaultMaxConns        = 128
	DefaultIdleTimeout     = 2 * time.Minute
	DefaultWriteTimeout    = 30 * time.Second
	DefaultMaxSession      = 30 * time.Minute
	DefaultShutdownTimeout = 30 * time.Second
	DefaultMaxHeaderBytes  = 64 << 10
	DefaultMaxDataBytes    = 1 << 20
	DefaultMaxPayloadBytes = 1 << 20
	DefaultMaxTextBytes    = 1 << 20
	// DefaultTextBuffer is how many text pieces of a stream wait for the
	// talker before the connection's reading waits too.
	DefaultTextBuffer = 16
	// DefaultMaxStream bounds a stream from synthesize-start to
	// synthesize-stop.
	DefaultMaxStream = 2 * time.Minute
)

// refuseTimeout bounds the error event written to a connection refused
// because the server holds its most connections.
const refuseTimeout = time.Second

// Options configure a Server. The zero value takes the defaults above.
type Options struct {
	// DefaultModel names the pipeline a synthesis without a voice speaks
	// with, as the HTTP API's --default-model: "" means tts when it is
	// served, else the first pipeline.
	DefaultModel string
	// Logger gets a line per connection and failure; nil discards them.
	Logger *slog.Logger
	// Registerer receives the server's metrics; nil registers them nowhere.
	Registerer prometheus.Registerer
	// MaxConns bounds the connections open at once. A new one past it
	// takes the place of the connection waiting for its next event, with
	// no synthesis under way, for the longest (at least
	// sessions.EvictGrace), which gets an error event and is closed; when
	// every connection is synthesizing, the new one gets the error event.
	MaxConns int
	// IdleTimeout closes a connection from which no event came for that
	// long (between events, and within one).
	IdleTimeout time.Duration
	// WriteTimeout bounds each write to a client: one that stops reading
	// for that long is cut off and its synthesis aborted.
	WriteTimeout time.Duration
	// MaxSession bounds a connection's life.
	MaxSession time.Duration
	// ShutdownTimeout bounds how long a stop waits for the syntheses in
	// progress before it aborts them.
	ShutdownTimeout time.Duration
	// MaxHeaderBytes, MaxDataBytes and MaxPayloadBytes bound an event's
	// header line, data section and payload; MaxTextBytes the text of one
	// synthesis, a stream's pieces together.
	MaxHeaderBytes, MaxDataBytes, MaxPayloadBytes, MaxTextBytes int
	// TextBuffer bounds the text pieces of a stream that wait for the
	// talker.
	TextBuffer int
	// MaxStream bounds a stream (synthesize-start to synthesize-stop),
	// for which its request holds an admission slot of its pipeline: past
	// it the stream fails with stream_limit.
	MaxStream time.Duration
	// LiveShare bounds the share of each pipeline's admission slots that
	// streams (live input, with the HTTP API's speech stream sessions
	// when it is given the same Share) hold at once: a stream past it
	// fails with overloaded. Nil means a Share of its own of
	// sessions.DefaultLiveShare.
	LiveShare *sessions.Share
	// Peers are the networks whose connections the server serves; nil
	// serves every peer. Another peer's connection gets an error event
	// (forbidden_peer) and is closed.
	Peers []netip.Prefix
	// SentenceQuiet is how long a stream's text may end in a full stop,
	// no next piece coming, before its sentence is spoken anyway (a full
	// stop alone does not end a sentence: "Dr. Smith"); 0 means
	// engine.DefaultSentenceQuiet, negative never (the next word decides).
	SentenceQuiet time.Duration
}

// Server serves the Wyoming protocol's text-to-speech side over the
// pipelines of a server's orchestrators. It neither starts nor stops them:
// whoever owns them does (the HTTP API's Run), and a synthesis asked for
// before a pipeline is ready fails with an error event.
type Server struct {
	cat  *catalog
	opts Options
	log  *slog.Logger
	m    *metrics

	// group counts the sessions and the refusals being written, and ends
	// them at a stop (see Run).
	group *sessions.Group
	// limit bounds the sessions (MaxConns), evicting idle ones.
	limit *sessions.Limit

	mu       sync.Mutex
	sessions map[*session]struct{}
}

// New returns a server of the pipelines of orchs that take text and make
// audio (at least one must).
func New(orchs []*orchestrator.Orchestrator, opts Options) (*Server, error) {
	cat, err := newCatalog(orchs, opts.DefaultModel)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	defaults.Set(&opts.MaxConns, DefaultMaxConns)
	defaults.Set(&opts.IdleTimeout, DefaultIdleTimeout)
	defaults.Set(&opts.WriteTimeout, DefaultWriteTimeout)
	defaults.Set(&opts.MaxSession, DefaultMaxSession)
	defaults.Set(&opts.ShutdownTimeout, DefaultShutdownTimeout)
	defaults.Set(&opts.MaxHeaderBytes, DefaultMaxHeaderBytes)
	defaults.Set(&opts.MaxDataBytes, DefaultMaxDataBytes)
	defaults.Set(&opts.MaxPayloadBytes, DefaultMaxPayloadBytes)
	defaults.Set(&opts.MaxTextBytes, DefaultMaxTextBytes)
	defaults.Set(&opts.TextBuffer, DefaultTextBuffer)
	defaults.Set(&opts.MaxStream, DefaultMaxStream)
	if opts.LiveShare == nil {
		opts.LiveShare, _ = sessions.NewShare(sessions.DefaultLiveShare)
	}
	if opts.SentenceQuiet == 0 {
		opts.SentenceQuiet = engine.DefaultSentenceQuiet
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("wyoming: metrics: %w", err)
	}
	return &Server{cat: cat, opts: opts, log: opts.Logger, m: m, group: sessions.New(),
		limit: sessions.NewLimit(opts.MaxConns, sessions.EvictGrace), sessions: map[*session]struct{}{}}, nil
}

// Run serves on ln until ctx ends, then stops, in this order:
//
//  1. the listener closes: no new connection;
//  2. a connection between syntheses (waiting for its next event) gets a
//     shutting_down error event and is closed; one in a synthesis (a
//     synthesize being spoken, or a stream between synthesize-start and
//     synthesize-stopped) goes on to that synthesis's end, then closes;
//  3. once ShutdownTimeout has passed, the connections left are closed
//     and their syntheses aborted.
//
// The pipelines' own shutdown, by their owner, waits for the requests in
// flight as well. Run returns once every connection has ended: nil after a
// stop caused by ctx, or the listener's error. It closes ln.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	s.log.Info("wyoming server listening", "addr", ln.Addr().String(), "pipelines", s.pipelineNames())
	var runErr error
	backoff := time.Duration(0)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of file descriptors, say: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("wyoming: accept failed; retrying", "err", err, "in", backoff.String())
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				continue
			}
			runErr = fmt.Errorf("wyoming: accept: %w", err)
			_ = ln.Close()
			break
		}
		backoff = 0
		s.open(conn)
	}
	s.drain()
	s.log.Info("wyoming server stopped")
	return runErr
}

// open starts the session of conn, or refuses it when the server holds its
// most connections.
func (s *Server) open(conn net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.group.Add() {
		_ = conn.Close()
		return
	}
	if !s.allowed(conn.RemoteAddr()) {
		s.m.forbidden.Inc()
		go func() {
			defer s.group.Done()
			s.refusePeer(conn)
		}()
		return
	}
	var sess *session
	slot, ok := s.limit.Take(func() {
		s.m.evicted.Inc()
		sess.evict()
	})
	if !ok {
		s.m.refused.Inc()
		go func() {
			defer s.group.Done()
			s.refuse(conn)
		}()
		return
	}
	sess = s.newSession(conn, slot)
	s.sessions[sess] = struct{}{}
	s.m.conns.Inc()
	go func() {
		defer s.group.Done()
		defer s.closed(sess)
		defer slot.Release()
		sess.run()
	}()
}

// refuse tells conn the server holds its most connections and closes it.
func (s *Server) refuse(conn net.Conn) {
	defer conn.Close()
	w := newWriter(conn, conn, refuseTimeout)
	_ = w.write(typeError, errorData{Text: fmt.Sprintf("the server holds its most connections (%d); try again later", s.opts.MaxConns), Code: CodeTooManyConnections}, nil, true)
}

// allowed reports whether the server serves a connection from addr
// (Options.Peers).
func (s *Server) allowed(addr net.Addr) bool {
	if s.opts.Peers == nil {
		return true
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range s.opts.Peers {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// refusePeer tells conn, from a network the server does not serve, so,
// and closes it.
func (s *Server) refusePeer(conn net.Conn) {
	defer conn.Close()
	s.log.Info("wyoming: a connection from a network not served was refused", "remote", conn.RemoteAddr().String())
	w := newWriter(conn, conn, refuseTimeout)
	_ = w.write(typeError, errorData{Text: "this server does not serve connections from " + conn.RemoteAddr().String() + " (serve --wyoming-peers)", Code: CodeForbiddenPeer}, nil, true)
}

func (s *Server) closed(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sess)
	s.m.conns.Dec()
}

// drain ends the sessions as Run's steps 2 and 3 say.
func (s *Server) drain() {
	s.mu.Lock()
	s.group.Stop()
	for sess := range s.sessions {
		sess.wake()
	}
	n := len(s.sessions)
	s.mu.Unlock()
	if n > 0 {
		s.log.Info("wyoming: waiting for the connections in a synthesis", "connections", n, "timeout", s.opts.ShutdownTimeout.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if !s.group.Drain(ctx) {
		s.log.Warn("wyoming: syntheses were still running at the shutdown timeout; they were aborted")
	}
}

func (s *Server) pipelineNames() []string {
	names := make([]string, len(s.cat.targets))
	for i, t := range s.cat.targets {
		names[i] = t.name
	}
	return names
}

// metrics are the server's own; its requests are counted with every other
// in the pipelines' metrics.
type metrics struct {
	conns     prometheus.Gauge
	refused   prometheus.Counter
	evicted   prometheus.Counter
	forbidden prometheus.Counter
	syntheses *prometheus.CounterVec
	protocol  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "omnistage_wyoming_connections",
			Help: "Wyoming connections open."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "omnistage_wyoming_connections_refused_total",
			Help: "Wyoming connections refused because the server held its most, all of them synthesizing."}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "omnistage_wyoming_connections_evicted_total",
			Help: "Wyoming connections closed while waiting for an event, to make room for a new one."}),
		forbidden: prometheus.NewCounter(prometheus.CounterOpts{Name: "omnistage_wyoming_connections_forbidden_total",
			Help: "Wyoming connections refused because they came from a network the server does not serve."}),
		syntheses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "omnistage_wyoming_syntheses_total",
			Help: "Wyoming syntheses ended, by form (whole: synthesize; stream: synthesize-start to -stop) and outcome (ok, failed, cancelled)."},
			[]string{"form", "outcome"}),
		protocol: prometheus.NewCounter(prometheus.CounterOpts{Name: "omnistage_wyoming_protocol_errors_total",
			Help: "Wyoming events refused as malformed or out of place (error events malformed_event and unexpected_event)."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.conns, m.refused, m.evicted, m.forbidden, m.syntheses, m.protocol} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
