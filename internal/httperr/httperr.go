// Package httperr writes errors in the OpenAI error shape and maps every
// error the server meets (the orchestrator's codes, payload errors, HTTP
// errors of its own) to an HTTP status, in one place.
package httperr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// Body is the OpenAI error shape: {"error": {"message", "type", "code"}}.
type Body = apijson.ErrorBody

// Detail is the inside of Body.
type Detail = apijson.ErrorDetail

// RetryAfterSeconds is the Retry-After sent with a 503.
const RetryAfterSeconds = 1

// The OpenAI error types.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
)

// Codes of the HTTP layer's own errors (Error.Code), besides the
// orchestrator's and the payload package's.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeBodyTooLarge     = "body_too_large"
	CodeBodyTimeout      = "body_timeout"
	CodeUnknownRoute     = "unknown_route"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInvalidAPIKey    = "invalid_api_key"
	CodeModelNotFound    = "model_not_found"
	CodeWrongStage       = "wrong_stage"
	CodeNotReady         = "not_ready"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeForbiddenOrigin  = "forbidden_origin"
	CodeForbiddenHost    = "forbidden_host"
	// The speech stream's (WS /v1/audio/speech/stream).
	CodeWebSocketRequired = "websocket_required"
	CodeInputTooLarge     = "input_too_large"
	CodeSessionTimeout    = "session_timeout"
	CodeSessionEvicted    = "session_evicted"
	// Requests net/http refuses before any handler runs.
	CodeHeadersTooLarge     = "headers_too_large"
	CodeHeaderTimeout       = "header_timeout"
	CodeExpectationFailed   = "expectation_failed"
	CodeUnsupportedEncoding = "unsupported_transfer_encoding"
	CodeUnsupportedVersion  = "unsupported_http_version"
)

// Error is an error of the HTTP layer with its status: bad JSON, an
// unknown route, a missing API key.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns an *Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400 bad_request *Error with a formatted message:
// input the caller can correct.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, string(orchestrator.CodeBadRequest), format, args...)
}

// Write sends an error with the given status, type and code, as one JSON
// line of a stated length (a caller may still be sending its body, and
// read the answer's end before its own).
func Write(w http.ResponseWriter, status int, typ, code, msg string) {
	b, _ := json.Marshal(Body{Error: Detail{Message: msg, Type: typ, Code: code}}) // strings only: it cannot fail
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Status returns the HTTP status and OpenAI error type for an orchestrator
// error code.
func Status(code orchestrator.Code) (int, string) {
	switch code {
	case orchestrator.CodeBadRequest:
		return http.StatusBadRequest, TypeInvalidRequest
	case orchestrator.CodeConflict:
		return http.StatusConflict, TypeInvalidRequest
	case orchestrator.CodeNotFound:
		return http.StatusNotFound, TypeInvalidRequest
	case orchestrator.CodeOverloaded, orchestrator.CodeUnavailable:
		return http.StatusServiceUnavailable, TypeServer
	case orchestrator.CodeAborted:
		// The request was aborted on purpose; nginx's 499 "client closed
		// request" is the usual status for that.
		return 499, TypeInvalidRequest
	case orchestrator.CodeAbortFailed:
		// The abort is under way but its drain outlasted the timeout.
		return http.StatusGatewayTimeout, TypeServer
	case orchestrator.CodeReplicaLost, orchestrator.CodeUpstream:
		return http.StatusBadGateway, TypeServer
	case orchestrator.CodeDeadline:
		return http.StatusGatewayTimeout, TypeServer
	}
	return http.StatusInternalServerError, TypeServer
}

// Classify returns the status, OpenAI type and code of any error: an
// *Error, a lost replica (502, whatever broke when it was lost: a stream
// it cut short is a *payload.Error, and the server's failure), a stage
// server's error answer (engine.UpstreamError: 502 with its code), a
// *payload.Error (a 413 when too large, otherwise a 400), an
// *http.MaxBytesError (413), or else whatever orchestrator.CodeOf says.
func Classify(err error) (status int, typ, code string) {
	var (
		he *Error
		rl *orchestrator.ReplicaLostError
		ue *engine.UpstreamError
		pe *payload.Error
		me *http.MaxBytesError
	)
	switch {
	case errors.As(err, &he):
		return he.Status, typeOf(he.Status), he.Code
	case errors.As(err, &rl):
		status, typ = Status(orchestrator.CodeReplicaLost)
		return status, typ, string(orchestrator.CodeReplicaLost)
	case errors.As(err, &ue):
		return upstream(ue)
	case errors.As(err, &pe):
		if pe.Code == payload.CodeTooLarge {
			return http.StatusRequestEntityTooLarge, TypeInvalidRequest, pe.Code
		}
		return http.StatusBadRequest, TypeInvalidRequest, pe.Code
	case errors.As(err, &me):
		return http.StatusRequestEntityTooLarge, TypeInvalidRequest, CodeBodyTooLarge
	}
	c := orchestrator.CodeOf(err)
	status, typ = Status(c)
	return status, typ, string(c)
}

// upstream classifies a stage server's error answer: the server side's
// failure whatever its status (a 4xx there is a refusal of this server's
// call, not of the client's request), with the upstream's own code; its
// 503 stays a 503, which a client may retry.
func upstream(ue *engine.UpstreamError) (status int, typ, code string) {
	code = ue.Code
	if code == "" {
		code = string(orchestrator.CodeUpstream)
	}
	if ue.Status == http.StatusServiceUnavailable {
		return http.StatusServiceUnavailable, TypeServer, code
	}
	return http.StatusBadGateway, TypeServer, code
}

func typeOf(status int) string {
	if status >= 500 {
		return TypeServer
	}
	return TypeInvalidRequest
}

// WriteError classifies err with Classify and writes it.
func WriteError(w http.ResponseWriter, err error) {
	status, typ, code := Classify(err)
	msg := err.Error()
	var me *http.MaxBytesError
	if errors.As(err, &me) {
		msg = fmt.Sprintf("request body is larger than this endpoint's limit of %d bytes", me.Limit)
	}
	Write(w, status, typ, code, msg)
}
