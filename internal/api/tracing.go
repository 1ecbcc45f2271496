package api

// Tracing: the server spans of the traced routes.

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/telemetry"
)

// traced wraps h (the observed routes) in otelhttp's server spans. The
// probes and /metrics are not traced (they are polled; a trace each
// would drown the requests); /v1/run starts its own span once its
// payload has named the parent (package stageserver).
func traced(h http.Handler, tp trace.TracerProvider) http.Handler {
	return otelhttp.NewHandler(h, "omnistage",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(telemetry.Propagator),
		otelhttp.WithFilter(func(r *http.Request) bool {
			switch r.URL.Path {
			case "/health", "/ready", "/metrics", "/v1/run":
				return false
			}
			return true
		}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + spanRoute(r.URL.Path)
		}),
	)
}

// spanRoute names a path for a span: its route, not the path itself
// (request ids and unknown paths would make every name different).
func spanRoute(path string) string {
	switch {
	case strings.HasPrefix(path, "/v1/requests/"):
		return "/v1/requests/{id}"
	case strings.HasPrefix(path, "/v1/"):
		return path
	case path == "/":
		return "/"
	}
	return "/{other}"
}
