// Package httperr writes errors in the OpenAI error shape and maps the
// orchestrator's error codes to HTTP statuses, in one place.
package httperr

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/omnistage/omnistage/internal/orchestrator"
)

// Body is the OpenAI error shape: {"error": {"message", "type", "code"}}.
type Body struct {
	Error Detail `json:"error"`
}

// Detail is the inside of Body.
type Detail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// RetryAfterSeconds is the Retry-After sent with a 503.
const RetryAfterSeconds = 1

// Write sends an error with the given status, type and code.
func Write(w http.ResponseWriter, status int, typ, code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Body{Error: Detail{Message: msg, Type: typ, Code: code}})
}

// Status returns the HTTP status and OpenAI error type for an orchestrator
// error code.
func Status(code orchestrator.Code) (int, string) {
	switch code {
	case orchestrator.CodeBadRequest:
		return http.StatusBadRequest, "invalid_request_error"
	case orchestrator.CodeConflict:
		return http.StatusConflict, "invalid_request_error"
	case orchestrator.CodeNotFound:
		return http.StatusNotFound, "invalid_request_error"
	case orchestrator.CodeOverloaded, orchestrator.CodeUnavailable:
		return http.StatusServiceUnavailable, "server_error"
	case orchestrator.CodeAborted:
		// The request was aborted on purpose; nginx's 499 "client closed
		// request" is the usual status for that.
		return 499, "invalid_request_error"
	case orchestrator.CodeAbortFailed:
		// The abort is under way but its drain outlasted the timeout.
		return http.StatusGatewayTimeout, "server_error"
	case orchestrator.CodeReplicaLost:
		return http.StatusBadGateway, "server_error"
	case orchestrator.CodeDeadline:
		return http.StatusGatewayTimeout, "server_error"
	}
	return http.StatusInternalServerError, "server_error"
}

// WriteError classifies err with orchestrator.CodeOf and writes it.
func WriteError(w http.ResponseWriter, err error) {
	code := orchestrator.CodeOf(err)
	status, typ := Status(code)
	Write(w, status, typ, string(code), err.Error())
}
