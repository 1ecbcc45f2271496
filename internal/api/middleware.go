package api

// The outermost handler: HTTP metrics, the access log and the recovery
// of a handler's panic.

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/api/requestid"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// The route labels of the HTTP metrics: a fixed set.
const (
	routeSpeech    = "speech"
	routeGenerate  = "generate"
	routeVoices    = "voices"
	routeCaptions  = "captions"
	routeRun       = "run"
	routeRequests  = "requests"
	routeModels    = "models"
	routeHealth    = "health"
	routeReady     = "ready"
	routeMetrics   = "metrics"
	routeUnmatched = "unmatched"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttfb     *prometheus.HistogramVec
	inflight prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "omnistage_http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "omnistage_http_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its response, by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"route"}),
		ttfb: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "omnistage_http_time_to_first_byte_seconds",
			Help:    "Time from a request's arrival to the first byte of its response body, by route: for streamed speech, the time to first audio.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"route"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "omnistage_http_requests_inflight",
			Help: "HTTP requests being answered.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.ttfb, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// reqInfo is what the handlers tell the access log about a request.
type reqInfo struct {
	route string
	id    string
}

type infoKey struct{}

// info returns r's reqInfo; a request that did not pass through observe
// gets a throwaway one.
func info(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// setRequestID records the request id for the access log and sends it back
// in the X-Request-Id header.
func setRequestID(w http.ResponseWriter, r *http.Request, id string) {
	info(r).id = id
	w.Header().Set(requestid.Header, id)
}

// observe is the outermost handler: metrics, the access log, and a recover
// that turns a handler's panic (a bug) into a logged 500.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// Until a handler knows the request's id, log the one the client
		// sent, if any.
		in := &reqInfo{route: routeUnmatched, id: r.Header.Get(requestid.Header)}
		ctx := context.WithValue(r.Context(), infoKey{}, in)
		var slot *telemetry.SpanSlot // where /v1/run leaves its span, when tracing
		if s.opts.TracerProvider != nil {
			ctx, slot = telemetry.WithSpanSlot(ctx)
		}
		r = r.WithContext(ctx)
		rw := &responseWriter{ResponseWriter: w, start: start}
		s.metrics.inflight.Inc()
		defer func() {
			p := recover()
			if p == http.ErrAbortHandler {
				// A handler cut the connection on purpose: net/http must
				// see the panic to close it, after the bookkeeping below.
				defer panic(p)
			}
			if p != nil && p != http.ErrAbortHandler {
				s.log.LogAttrs(r.Context(), slog.LevelError, "handler panic", slog.String("request_id", in.id),
					slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
				if rw.status == 0 {
					httperr.Write(rw, http.StatusInternalServerError, httperr.TypeServer, "internal_error", "internal error (a bug; it has been logged)")
				}
			}
			s.metrics.inflight.Dec()
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			took := time.Since(start)
			s.metrics.requests.WithLabelValues(in.route, strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(in.route).Observe(took.Seconds())
			if rw.firstByte > 0 {
				s.metrics.ttfb.WithLabelValues(in.route).Observe(rw.firstByte.Seconds())
			}
			if in.id == "" {
				// A handler outside this package (/v1/run's) names the
				// request in its answer's header.
				in.id = rw.Header().Get(requestid.Header)
			}
			level := slog.LevelInfo
			switch in.route {
			case routeHealth, routeReady, routeMetrics:
				level = slog.LevelDebug
			}
			if s.log.Enabled(r.Context(), level) {
				s.log.LogAttrs(slot.Context(r.Context()), level, "http request",
					slog.String("request_id", in.id),
					slog.String("method", r.Method),
					slog.String("path", r.URL.Path),
					slog.String("route", in.route),
					slog.Int("status", status),
					slog.Int64("bytes", rw.bytes),
					slog.Duration("duration", took),
					slog.String("remote", r.RemoteAddr))
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// responseWriter records the status, the body size and the time to the
// first body byte. Unwrap lets http.ResponseController reach the
// connection's flush and deadlines.
type responseWriter struct {
	http.ResponseWriter
	start     time.Time
	status    int
	bytes     int64
	firstByte time.Duration
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.firstByte == 0 && len(b) > 0 {
		w.firstByte = time.Since(w.start)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
