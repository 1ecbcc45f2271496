package api

// CORS: the headers that let the configured origins' pages call the API.

import (
	"net/http"
	"time"

	"github.com/rs/cors"

	"github.com/omnistage/omnistage/internal/api/requestid"
)

// corsHandler lets pages of origins call h from a browser: the methods and
// request headers the API takes (with the W3C trace context, so a traced
// page's requests join its trace), and the response headers a page needs
// to read (the request id, the sample rate of PCM, the timestamps and the
// error of a stream cut short).
func corsHandler(origins []string, h http.Handler) http.Handler {
	return cors.New(cors.Options{
		AllowedOrigins: origins,
		AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodDelete},
		AllowedHeaders: []string{"Authorization", "Content-Type", requestid.Header, headerTimestamps, headerStageTimings, elKeyHeader, "Traceparent", "Tracestate", "Baggage"},
		ExposedHeaders: []string{requestid.Header, headerSampleRate, headerTimestamps, headerTimestampsOmitted, headerStreamError},
		MaxAge:         int((10 * time.Minute).Seconds()),
	}).Handler(h)
}
