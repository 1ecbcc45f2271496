// Package stageserver is the stage server's side of POST /v1/run: it runs
// exactly one stage of a pipeline per call, through the orchestrator, in
// either form package hop describes (one-shot JSON, or a streamed payload
// stream both ways).
//
// # Identity of a hop
//
// A hop is one call. Its request id (request_id, X-Request-Id, or the
// payload's) names the request it belongs to, for logs, X-Request-Id and
// DELETE /v1/requests/{id}, but it is not the hop's identity and it is not
// claimed: two calls with identical bodies are two hops, and both run. So
// a coordinator that retries a hop after a timeout, while the first
// attempt still runs, gets two answers, never a 409. DELETE
// /v1/requests/{id} on a stage server aborts every hop of that request
// there (see package orchestrator).
//
// # Bounds
//
// Every streamed hop is bounded (Limits): the rate of its input within a
// frame, the pause between two frames, and its length, so that a caller
// that sends slowly cannot hold a replica. A caller that does not read
// the answer blocks the server's writes, each bounded by a deadline. A
// server notices a caller that went away only by reading or writing,
// which is why it reads the input ahead of the stage, and, while that
// read-ahead is full, watches the connection's TCP state (WithConn).
package stageserver

// Server and its options, and Serve, which tells the one-shot form from
// the streamed one and starts the stage of a checked call (submit).

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// Defaults of ServerOptions.
const (
	DefaultBodyReadTimeout = 60 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
)

// ServerOptions configure a Server. The zero value serves every route
// stage with unsigned payloads and the defaults.
type ServerOptions struct {
	// Codec encodes and decodes payloads; nil means an unsigned codec with
	// the default size limit.
	Codec *payload.Codec
	// Stage, when set, makes a headless stage server's /v1/run: any other
	// stage is refused with wrong_stage.
	Stage *int
	// Logger gets the failures of answers already under way; nil discards.
	Logger *slog.Logger
	// MaxBody bounds a JSON body; 0 means the base64 length of the codec's
	// largest payload plus 1 MiB. A streamed body has no total bound (a
	// long request streams for long); each of its frames is bounded by the
	// codec's size limit.
	MaxBody int64
	// BodyReadTimeout bounds reading a JSON body, and the wait for each
	// frame of a streamed one to begin.
	BodyReadTimeout time.Duration
	// Limits bound each streamed hop: its input's rate and its length.
	Limits Limits
	// WriteTimeout bounds each write of an answer (one frame of a stream):
	// a caller that stops reading is cut off and the hop aborted.
	WriteTimeout time.Duration
	// TracerProvider, when set, traces each call (see trace.go).
	TracerProvider trace.TracerProvider
	// MaxBodyMemory bounds the bytes that the calls in progress hold at
	// once for their JSON bodies and for the stream frames longer than
	// payload.ReserveMin that they read; a call that cannot take its part
	// within BodyReadTimeout is refused as overloaded (503). 0 means
	// DefaultBodyMemoryFactor times MaxBody.
	MaxBodyMemory int64
	// Idle, when not nil, hears when the calls start and stop holding
	// memory of that bound, refused calls too (package memtrim trims the
	// memory they leave once the server is quiet).
	Idle membudget.IdleObserver
}

// DefaultBodyMemoryFactor is how many of the largest JSON bodies the calls
// in progress may hold at once by default: with the default 32 MiB
// payloads, about 175 MiB, which holds the decoded payloads of five of the
// largest bodies (a payload is three quarters of its base64).
const DefaultBodyMemoryFactor = 4

// Server answers POST /v1/run for one orchestrator: it runs exactly one
// stage per call, one-shot (JSON) or streamed, and renders the answer.
// The HTTP concerns around it (authentication, metrics, the route) are its
// caller's.
type Server struct {
	orch   *orchestrator.Orchestrator
	cfg    *pipeline.Config
	codec  *payload.Codec
	digest [32]byte
	opts   ServerOptions
	log    *slog.Logger
	tracer trace.Tracer      // nil when tracing is off
	bodies *membudget.Budget // of JSON bodies and big stream frames
}

// NewServer returns the /v1/run server of o.
func NewServer(o *orchestrator.Orchestrator, opts ServerOptions) (*Server, error) {
	cfg := o.Config()
	if opts.Stage != nil {
		if err := cfg.CheckServable(*opts.Stage); err != nil {
			return nil, fmt.Errorf("hop: %w", err)
		}
	}
	if opts.Codec == nil {
		opts.Codec = payload.NewCodec(nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = int64(base64.RawURLEncoding.EncodedLen(opts.Codec.MaxSize()) + 1<<20)
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	opts.Limits = opts.Limits.withDefaults(cfg)
	if opts.MaxBodyMemory <= 0 {
		opts.MaxBodyMemory = DefaultBodyMemoryFactor * opts.MaxBody
	}
	opts.MaxBodyMemory = max(opts.MaxBodyMemory, opts.MaxBody) // one body always fits
	srv := &Server{orch: o, cfg: cfg, codec: opts.Codec, digest: cfg.Digest(), opts: opts, log: opts.Logger,
		bodies: membudget.New(opts.MaxBodyMemory, opts.BodyReadTimeout, opts.Idle)}
	if opts.TracerProvider != nil {
		srv.tracer = opts.TracerProvider.Tracer(telemetry.Name)
	}
	return srv, nil
}

// call is one checked /v1/run call: the stage to run on input, and the
// envelope it came in (for the entry stage, one made from the request, as
// if addressed to stage 0 by nobody).
type call struct {
	stage int
	id    string // the request id; "" to have one generated
	env   *payload.Envelope
	sel   *pipeline.Selection
	input engine.Source
}

// Serve answers one POST /v1/run. When it returns an error it has written
// nothing, and the caller answers with the error; once an answer is under
// way, Serve ends it itself (with an error frame, for a stream). Every
// problem with the request or its payload is a 4xx and nothing runs.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	if hop.IsStream(r.Header.Get("Content-Type")) {
		return s.serveStream(w, r, start)
	}
	body, release, err := s.readRun(w, r)
	defer release() // the stage's input is the body's payload
	if err != nil {
		return err
	}
	c, err := s.parseRun(r, body)
	if err != nil {
		return err
	}
	streamed := c.stage == hop.EntryStage && acceptsStream(r)
	r, end := s.traced(r, c, start, streamed)
	if streamed {
		err = s.runStreamed(w, r, c)
	} else {
		err = s.runOneShot(w, r, c)
	}
	end(err)
	return err
}

// acceptsStream reports whether the caller asks for a streamed answer.
func acceptsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if hop.IsStream(strings.TrimSpace(part)) {
				return true
			}
		}
	}
	return false
}

// submit starts the call's stage: the one place where a /v1/run call
// reaches the orchestrator.
func (s *Server) submit(r *http.Request, c *call) (*orchestrator.Stream, error) {
	input := c.input
	if feed := c.env.Prompt.Feed; feed != nil {
		// A streamed request's text: the stage's prompt holds it so far.
		input = engine.Feeding(input, feed)
	}
	st, err := s.orch.SubmitStage(r.Context(), orchestrator.StageCall{
		ID: c.id, Stage: c.stage, Prompt: c.env.Prompt, Params: c.env.Params, Input: input,
	})
	if err != nil {
		return nil, err
	}
	if c.stage == hop.EntryStage {
		c.env.RequestID, c.env.TransferID = st.ID(), st.ID()
	}
	return st, nil
}
