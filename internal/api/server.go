package api

// The server: its options, its construction, its endpoint table and what
// every route does, and the small endpoints (health, readiness, models).

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/defaults"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/quote"
	"github.com/omnistage/omnistage/internal/sessions"
	"github.com/omnistage/omnistage/internal/stageserver"
	"github.com/omnistage/omnistage/internal/voice"
)

// Defaults of Options.
const (
	DefaultMaxBody           = 1 << 20
	DefaultMaxConns          = 1024
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultChunkWriteTimeout = 30 * time.Second
	DefaultBodyReadTimeout   = 60 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
)

// Options configure a Server. The zero value is a full server without an API
// key, with unsigned payloads and the defaults above.
type Options struct {
	// Codec encodes and decodes /v1/run payloads; nil means an unsigned
	// codec with the default size limit.
	Codec *payload.Codec
	// Stage, when set, makes a headless stage server: only stage *Stage's
	// /v1/run (plus /v1/requests/{id} for its hops, /health, /ready,
	// /metrics, /v1/models) is served.
	Stage *int
	// APIKey, when not empty, must be sent as "Authorization: Bearer KEY"
	// to every endpoint except /health, /ready and the playground's page
	// and files.
	APIKey string
	// CORSOrigins are the web origins ("https://app.example.com", or "*"
	// for any) whose pages may call the API from a browser; none: no CORS
	// headers, and browsers keep other origins' pages out.
	CORSOrigins []string
	// AllowedHosts are the host names, besides its addresses, localhost,
	// this machine's host name and the hosts of CORSOrigins, that the
	// server answers to (a Host header of another name is refused, 403
	// forbidden_host: a rebound DNS name): "stage-1.example.com",
	// ".svc.cluster.local" or "*.svc.cluster.local" for every name of a
	// domain, "*" for any name.
	AllowedHosts []string
	// Logger gets access logs and failures; nil discards them.
	Logger *slog.Logger
	// Registry receives the HTTP metrics, and /metrics serves everything
	// registered in it (the orchestrator's metrics too, when it was built
	// with the same registry); nil makes a private one.
	Registry *prometheus.Registry
	// MaxBody bounds request bodies other than /v1/run's, in bytes.
	MaxBody int64
	// MaxImageBody bounds a POST /v1/generate body, which may carry an
	// image (its text is still bounded by MaxBody); 0 means
	// DefaultMaxImageBody.
	MaxImageBody int64
	// MaxRunBody bounds one-shot (JSON) /v1/run bodies; 0 means the base64
	// length of the codec's largest payload plus 1 MiB (about 43.7 MiB for
	// the default 32 MiB payloads). A streamed body's frames are bounded by
	// the codec instead.
	MaxRunBody int64
	// RunMemoryIdle, when not nil, hears when /v1/run calls start and stop
	// holding memory for their bodies, refused ones too (package stageserver's
	// ServerOptions.Idle): the server's memory trimmer.
	RunMemoryIdle membudget.IdleObserver
	// MaxConns bounds the connections Run keeps open at once. A new one
	// past it takes the slot of the connection idle (or silent) the
	// longest; only when all carry requests does it wait.
	MaxConns int
	// ShutdownTimeout bounds how long Run waits for in-flight requests
	// when it stops, before it aborts them.
	ShutdownTimeout time.Duration
	// ChunkWriteTimeout bounds each write to a client (one chunk of a
	// stream): a client that stops reading is cut off and its request
	// aborted.
	ChunkWriteTimeout time.Duration
	// BodyReadTimeout bounds reading a request body (for a streamed
	// /v1/run body, the wait for each frame to begin).
	BodyReadTimeout time.Duration
	// HopLimits bound each streamed /v1/run hop: its input's rate and its
	// length (package stageserver's Limits; the zero value is their defaults).
	HopLimits stageserver.Limits
	// TracerProvider, when set, traces every request but the probes and
	// /metrics: a server span per request (otelhttp; /v1/run's is the hop
	// server's, see package stageserver), child of the caller's traceparent, and
	// the access log lines carry its trace_id. Nil traces nothing.
	TracerProvider trace.TracerProvider
	// ReadHeaderTimeout bounds reading a request's line and headers under
	// Run; a request that has begun and not ended by then is answered 408
	// header_timeout.
	ReadHeaderTimeout time.Duration
	// DefaultModel names the pipeline that a request without a model, or
	// with one of ModelAliases, gets; "" means tts when it is served, else
	// the first pipeline.
	DefaultModel string
	// StartPartial makes Run serve the pipelines that start when some do
	// not (they answer 503, and /ready names them), instead of failing.
	StartPartial bool
	// SpeechStream bounds the sessions of WS /v1/audio/speech/stream.
	SpeechStream SpeechStreamLimits
	// LiveShare bounds the share of each pipeline's admission slots that
	// live input (the speech stream's utterances, and a Wyoming server's
	// streams when it is given the same Share) holds at once; nil means
	// a Share of its own of sessions.DefaultLiveShare.
	LiveShare *sessions.Share
}

// Server is the HTTP API of a server's pipelines, one orchestrator each.
type Server struct {
	pipelines []*served // in the order given
	byName    map[string]*served
	def       *served // the default model's
	opts      Options
	log       *slog.Logger
	reg       *prometheus.Registry
	metrics   *httpMetrics
	keyHash   *[sha256.Size]byte
	created   int64
	handler   http.Handler
	// endpointList lists the endpoints, for the 404 of an unknown route.
	endpointList string

	hosts    *hostSet // the Host names it answers to
	draining atomic.Bool
	sessions wsSessions // of WS /v1/audio/speech/stream
}

// New returns the server of the pipelines of orchs, which should share
// one orchestrator.Requests (so that a request id is unique across them).
// It does not start them: Run does. A headless stage server
// (Options.Stage) serves one pipeline.
func New(orchs []*orchestrator.Orchestrator, opts Options) (*Server, error) {
	switch {
	case len(orchs) == 0:
		return nil, errors.New("api: no pipeline to serve")
	case opts.Stage != nil && len(orchs) > 1:
		return nil, fmt.Errorf("api: a stage server serves one pipeline's stage, not %d pipelines", len(orchs))
	case opts.Stage != nil:
		if err := orchs[0].Config().CheckServable(*opts.Stage); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Codec == nil {
		opts.Codec = payload.NewCodec(nil)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	defaults.Set(&opts.MaxBody, DefaultMaxBody)
	defaults.Set(&opts.MaxImageBody, DefaultMaxImageBody)
	defaults.Set(&opts.MaxConns, DefaultMaxConns)
	defaults.Set(&opts.ShutdownTimeout, DefaultShutdownTimeout)
	defaults.Set(&opts.ChunkWriteTimeout, DefaultChunkWriteTimeout)
	defaults.Set(&opts.BodyReadTimeout, DefaultBodyReadTimeout)
	defaults.Set(&opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	if opts.LiveShare == nil {
		opts.LiveShare, _ = sessions.NewShare(sessions.DefaultLiveShare)
	}

	m, err := newHTTPMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("api: metrics: %w", err)
	}
	s := &Server{
		byName: map[string]*served{}, opts: opts, log: opts.Logger,
		reg: opts.Registry, metrics: m,
		sessions: wsSessions{Group: sessions.New(), limit: sessions.NewLimit(opts.SpeechStream.withDefaults().MaxSessions, sessions.EvictGrace)},
		created:  time.Now().Unix(), hosts: newHostSet(opts.AllowedHosts, opts.CORSOrigins),
	}
	for _, o := range orchs {
		if err := s.add(o); err != nil {
			return nil, err
		}
	}
	if s.def, err = s.defaultModel(opts.DefaultModel); err != nil {
		return nil, err
	}
	for _, p := range s.pipelines {
		if isAlias(p.name) && p != s.def {
			s.log.Warn("a pipeline is named like one of OpenAI's model names, which stand for the default pipeline: requests for it get this pipeline, not the default",
				"pipeline", p.name, "default_model", s.def.name)
		}
	}
	if opts.APIKey != "" {
		h := sha256.Sum256([]byte(opts.APIKey))
		s.keyHash = &h
	}
	eps := s.endpoints()
	s.endpointList = listEndpoints(eps)
	s.handler = s.observe(s.routes(eps))
	if opts.TracerProvider != nil {
		s.handler = traced(s.handler, opts.TracerProvider)
	}
	if len(opts.CORSOrigins) > 0 {
		s.handler = corsHandler(opts.CORSOrigins, s.handler)
	}
	return s, nil
}

// add serves the pipeline of o.
func (s *Server) add(o *orchestrator.Orchestrator) error {
	cfg := o.Config()
	name := cfg.Pipeline.Name
	if s.byName[name] != nil {
		return fmt.Errorf("api: pipeline %s is given twice", name)
	}
	if err := checkVoiceAliases(o, cfg.VoiceAliases); err != nil {
		return fmt.Errorf("api: pipeline %s: %w", name, err)
	}
	h, err := stageserver.NewServer(o, stageserver.ServerOptions{
		Codec: s.opts.Codec, Stage: s.opts.Stage, Logger: s.opts.Logger, MaxBody: s.opts.MaxRunBody,
		BodyReadTimeout: s.opts.BodyReadTimeout, WriteTimeout: s.opts.ChunkWriteTimeout,
		TracerProvider: s.opts.TracerProvider, Limits: s.opts.HopLimits, Idle: s.opts.RunMemoryIdle,
	})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	p := &served{name: name, orch: o, cfg: cfg, hop: h, voices: voice.NewCache(o, cfg.VoiceAliases)}
	s.pipelines = append(s.pipelines, p)
	s.byName[name] = p
	return nil
}

// defaultModel returns the pipeline named name, or, for "", the one
// pipeline.DefaultModel picks.
func (s *Server) defaultModel(name string) (*served, error) {
	name, err := pipeline.DefaultModel(s.pipelineNames(), name)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return s.byName[name], nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// endpoint is one row of the server's endpoint table: a ServeMux pattern
// and its route.
type endpoint struct {
	pattern string
	route
}

// endpoints returns the server's endpoint table, from which routes builds
// the mux and notFound's list is made: the main endpoints first, the
// probes last. Patterns carry no methods: each route checks its own, so
// that a wrong method gets a 405 in the OpenAI error shape. A route that
// takes every method ("*") refuses the requests it gets, and is no
// endpoint to list.
func (s *Server) endpoints() []endpoint {
	var eps []endpoint
	if s.opts.Stage != nil {
		for _, p := range []string{"/v1/audio/speech", "/v1/generate"} {
			eps = append(eps, endpoint{p, route{name: routeUnmatched, methods: methods{"*": s.stageOnly}}})
		}
	} else {
		eps = append(eps,
			endpoint{"/v1/audio/speech", route{name: routeSpeech, maxBody: s.opts.MaxBody, methods: methods{http.MethodPost: s.speech}, bodyTypes: jsonBody}},
			s.speechStreamEndpoint(),
			endpoint{"/v1/generate", route{name: routeGenerate, maxBody: max(s.opts.MaxBody, s.opts.MaxImageBody), methods: methods{http.MethodPost: s.generate}, bodyTypes: generateBody}},
		)
	}
	eps = append(eps,
		// /v1/run bounds its own bodies: a one-shot body by MaxRunBody, a
		// streamed one frame by frame.
		endpoint{"/v1/run", route{name: routeRun, methods: methods{http.MethodPost: s.run}, bodyTypes: []string{"application/json", hop.ContentType}}},
		// On a headless stage server these reach the hops of a request.
		endpoint{"/v1/requests/{id}", route{name: routeRequests, methods: methods{http.MethodGet: s.lookup, http.MethodDelete: s.abort}}},
		endpoint{"/v1/models", route{name: routeModels, methods: methods{http.MethodGet: s.listModels}}},
	)
	if s.opts.Stage == nil {
		eps = append(eps,
			endpoint{"/v1/audio/models", route{name: routeModels, methods: methods{http.MethodGet: s.listAudioModels}}},
			endpoint{"/v1/audio/voices", route{name: routeVoices, methods: methods{http.MethodGet: s.listVoices}}},
			endpoint{"/v1/audio/captions", route{name: routeCaptions, maxBody: s.opts.MaxBody, methods: methods{http.MethodPost: s.captions}, bodyTypes: jsonBody}},
		)
		eps = append(eps, s.elevenLabsEndpoints()...)
		eps = append(eps, s.playgroundEndpoints()...)
	}
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
	return append(eps,
		endpoint{"/health", route{name: routeHealth, open: true, methods: methods{http.MethodGet: s.health}}},
		endpoint{"/ready", route{name: routeReady, open: true, methods: methods{http.MethodGet: s.ready}}},
		endpoint{"/metrics", route{name: routeMetrics, methods: methods{http.MethodGet: metrics.ServeHTTP}}},
	)
}

// routes builds the mux of eps, with notFound for every other path,
// behind canonical.
func (s *Server) routes(eps []endpoint) http.Handler {
	mux := http.NewServeMux()
	for _, e := range eps {
		mux.Handle(e.pattern, ours{s.route(e.route)})
	}
	mux.Handle("/", ours{s.route(route{name: routeUnmatched, methods: methods{"*": s.notFound}})})
	return s.canonical(mux)
}

// listEndpoints renders the endpoints of eps for notFound: "POST
// /v1/audio/speech, ..., GET and DELETE /v1/requests/{id}, ...".
func listEndpoints(eps []endpoint) string {
	order := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	rank := func(m string) int {
		if i := slices.Index(order, m); i >= 0 {
			return i
		}
		return len(order)
	}
	var list []string
	for _, e := range eps {
		if _, refuses := e.methods["*"]; refuses {
			continue
		}
		ms := slices.Collect(maps.Keys(e.methods))
		slices.SortFunc(ms, func(a, b string) int { return cmp.Or(rank(a)-rank(b), strings.Compare(a, b)) })
		list = append(list, strings.Join(ms, " and ")+" "+strings.TrimSuffix(e.pattern, "{$}"))
	}
	return strings.Join(list, ", ")
}

// ours marks the handlers of the routes, so that canonical can tell them
// from ServeMux's own.
type ours struct{ http.Handler }

// canonical answers in the JSON error shape the requests that ServeMux
// would answer with a handler of its own rather than a route's: a path
// that is not in canonical form ("/v1//generate", "/v1/../metrics"), which
// it redirects to the cleaned path (or, for a subtree pattern, to the path
// with a trailing slash); a CONNECT, which it does not route; the request
// target "*" (other than OPTIONS *, which net/http answers itself with an
// empty 200). The redirect becomes a 404 unknown_route that names the
// canonical path, not a redirect with a JSON body: the API's clients POST
// JSON, and a client that follows a redirect may drop the method or the
// body, or not follow it at all; and a path answered only once cleaned can
// slip past a proxy's rules for the clean one. No client needs such paths.
func (s *Server) canonical(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.RequestURI == "*" {
			s.fail(w, r, httperr.BadRequest("the request target * names no endpoint: send a path"))
			return
		}
		h, _ := mux.Handler(r)
		if _, ok := h.(ours); ok {
			mux.ServeHTTP(w, r)
			return
		}
		// Run ServeMux's own handler aside to see what it would answer.
		var own bufferedResponse
		h.ServeHTTP(&own, r)
		if to := own.Header().Get("Location"); to != "" {
			s.fail(w, r, httperr.Errorf(http.StatusNotFound, httperr.CodeUnknownRoute,
				"no endpoint %s %s: paths are served only in their canonical form, here %s", r.Method, quote.Short(r.URL.EscapedPath()), quote.Short(to)))
			return
		}
		s.notFound(w, r)
	})
}

// methods maps HTTP methods to handlers; "*" takes every method.
type methods map[string]http.HandlerFunc

// route is one path of the API.
type route struct {
	name    string // the metrics label
	open    bool   // served without an API key
	maxBody int64  // 0: the body is not read
	methods methods
	// bodyTypes are the content types a POST must have; none: any.
	bodyTypes []string
	// keyProtocol takes the API key from a WebSocket subprotocol too
	// (WSKeyProtocol), when no Authorization header is sent.
	keyProtocol bool
	// keyHeader names a header that may carry the API key, as is, when no
	// Authorization header is sent (ElevenLabs' xi-api-key).
	keyHeader string
	// socket: a WebSocket endpoint, whose refusals a browser sees
	// (refuse).
	socket bool
}

// jsonBody is the content type of the JSON POST endpoints.
var jsonBody = []string{"application/json"}

// generateBody are the content types of POST /v1/generate: JSON, and a
// multipart form that carries an image.
var generateBody = []string{"application/json", "multipart/form-data"}

// route wraps rt's handlers with what every route does: the metrics label,
// the method check, the API key check and the body limit.
func (s *Server) route(rt route) http.Handler {
	var allow []string
	for m := range rt.methods {
		allow = append(allow, m)
	}
	if _, ok := rt.methods[http.MethodGet]; ok {
		allow = append(allow, http.MethodHead)
	}
	slices.Sort(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info(r).route = rt.name
		h := rt.methods["*"]
		if h == nil {
			m := r.Method
			if m == http.MethodHead {
				m = http.MethodGet
			}
			h = rt.methods[m]
		}
		if h == nil {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.fail(w, r, httperr.Errorf(http.StatusMethodNotAllowed, httperr.CodeMethodNotAllowed,
				"method %s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		if err := s.checkSite(r, rt); err != nil {
			s.refuse(w, r, rt, err)
			return
		}
		if !rt.open && s.keyHash != nil {
			check := s.checkKey
			if _, keyed := protocolKey(r); rt.keyProtocol && keyed && r.Header.Get("Authorization") == "" {
				check = s.checkProtocolKey
			}
			if rt.keyHeader != "" && r.Header.Get(rt.keyHeader) != "" && r.Header.Get("Authorization") == "" {
				check = func(r *http.Request) error { return s.matchKey(r.Header.Get(rt.keyHeader), rt.keyHeader) }
			}
			if err := check(r); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="omnistage"`)
				s.refuse(w, r, rt, err)
				return
			}
		}
		if rt.maxBody > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, rt.maxBody)
		}
		h(w, r)
	})
}

// run answers POST /v1/run (package stageserver) with the pipeline that the
// header X-Omnistage-Pipeline (hop.HeaderPipeline) or ?model= names, the
// default one without either; the payload of a call must be that
// pipeline's, as the hop server checks.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	p := s.def
	if name := cmp.Or(r.Header.Get(hop.HeaderPipeline), r.URL.Query().Get("model")); name != "" {
		if p = s.byName[name]; p == nil {
			s.fail(w, r, httperr.Errorf(http.StatusNotFound, httperr.CodeModelNotFound, "no pipeline %q is served here; pipelines: %s", quote.Short(name), strings.Join(s.modelNames()[:len(s.pipelines)], ", ")))
			return
		}
	}
	if err := p.hop.Serve(w, r); err != nil {
		s.fail(w, r, err)
		if rf := (*stageserver.Refusal)(nil); errors.As(err, &rf) {
			rf.Drain()
		}
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, httperr.Errorf(http.StatusNotFound, httperr.CodeUnknownRoute,
		"no endpoint %s %s; endpoints: %s", r.Method, r.URL.Path, s.endpointList))
}

func (s *Server) stageOnly(w http.ResponseWriter, r *http.Request) {
	n, cfg := *s.opts.Stage, s.def.cfg
	s.fail(w, r, httperr.Errorf(http.StatusNotFound, httperr.CodeUnknownRoute,
		"this is a headless stage server for stage %d (%s) of pipeline %s: it serves only POST /v1/run for stage %d, GET and DELETE /v1/requests/{id} (its hops), GET /v1/models, /health, /ready and /metrics", n, cfg.StageName(n), cfg.Pipeline.Name, n))
}

// checkKey checks the bearer token in constant time. Both sides are hashed
// first so that the comparison does not reveal the key's length either.
func (s *Server) checkKey(r *http.Request) error {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return httperr.Errorf(http.StatusUnauthorized, httperr.CodeInvalidAPIKey, "missing API key: send the header Authorization: Bearer KEY")
	}
	return s.matchKey(tok, "Authorization")
}

// matchKey checks key, sent in header, against the server's in constant
// time. Both sides are hashed first so that the comparison does not
// reveal the key's length either.
func (s *Server) matchKey(key, header string) error {
	key = strings.TrimSpace(key)
	if key == "" {
		return httperr.Errorf(http.StatusUnauthorized, httperr.CodeInvalidAPIKey, "missing API key: the header %s is empty", header)
	}
	got := sha256.Sum256([]byte(key))
	if subtle.ConstantTimeCompare(got[:], s.keyHash[:]) != 1 {
		return httperr.Errorf(http.StatusUnauthorized, httperr.CodeInvalidAPIKey, "incorrect API key")
	}
	return nil
}

// fail writes err as the response, logging it when it is the server's
// fault.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, _, code := httperr.Classify(err)
	if status >= 500 && status != http.StatusServiceUnavailable {
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed", slog.String("request_id", info(r).id), slog.String("code", code), slog.Any("err", err))
	} else if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", slog.String("request_id", info(r).id), slog.Int("status", status), slog.String("code", code), slog.Any("err", err))
	}
	httperr.WriteError(w, err)
}
