// Package api is omnistage's HTTP server over the orchestrators of one
// or more pipelines, which a request picks by its model: the
// OpenAI-compatible speech endpoint, the native generate endpoint, POST
// /v1/run (served by package stageserver), request abort and lookup, models,
// voices, captions, the served pipeline, health, readiness, metrics and
// the playground. The reference of every endpoint, request field and error
// code is docs/api.md in the repository; the JSON shapes live in package
// apijson.
//
// New builds a Server for the orchestrators; Run serves it on a listener
// and owns the lifecycle: it starts the orchestrators, and drains
// in-flight requests and live sessions on shutdown. Every endpoint is a row
// of the server's endpoint table (Server.endpoints), from which both the
// mux and the list that a 404 unknown_route answer gives are built; route
// wraps each handler with what all share: the metrics label, the method
// check, the cross-site checks (checkSite), the API key and the body
// limit.
//
// Errors are written in the OpenAI shape by package httperr, whose
// Classify maps every error to one status; fail logs those that are the
// server's fault. Streamed answers send their headers with the first
// output, so a request that fails before it gets a plain error status; a
// failure after that is logged (streamFailed) and ends the stream with an
// in-band error. What net/http refuses before any handler runs is answered
// in the same shape at the connection (answerConn).
package api
