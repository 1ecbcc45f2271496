package orchestrator

// The orchestrator's errors and CodeOf, the one place where an error
// becomes a code.

import (
	"context"
	"errors"
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// Code classifies an error for callers; the HTTP layer maps each code to one
// status.
type Code string

// The codes.
const (
	CodeBadRequest   Code = "bad_request"    // the caller's input: 400
	CodeConflict     Code = "conflict"       // request id still active or draining: 409
	CodeNotFound     Code = "not_found"      // no such request: 404
	CodeOverloaded   Code = "overloaded"     // in-flight limit, a stage queue or a memory budget is full: 503
	CodeUnavailable  Code = "unavailable"    // not ready, shutting down, no healthy replica: 503
	CodeAborted      Code = "aborted"        // the request was aborted or its client went away
	CodeAbortFailed  Code = "abort_failed"   // an abort did not drain within its timeout
	CodeReplicaLost  Code = "replica_lost"   // a replica bound to the request was lost: 502
	CodeStageFailed  Code = "stage_failed"   // an engine failed: 500
	CodeUpstream     Code = "upstream_error" // a stage server answered an error: 502 (503 for its 503s), with its own code
	CodeInternal     Code = "internal_error" // a bug: 500
	CodeDeadline     Code = "timeout"        // the caller's deadline passed: 504
	codeUnclassified Code = ""
)

// Error is a classified error of the orchestrator.
type Error struct {
	Code Code
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func newError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ReplicaLostError fails a request whose bound replica was lost. Why,
// when set, says why the request could not go on on another replica of
// the stage, where it may.
type ReplicaLostError struct {
	Stage   int
	Name    string
	Replica string
	Err     error
	Why     string
}

func (e *ReplicaLostError) Error() string {
	msg := fmt.Sprintf("stage %d (%s): replica %s was lost: %v", e.Stage, e.Name, e.Replica, e.Err)
	if e.Why != "" {
		msg += " (it could not go on elsewhere: " + e.Why + ")"
	}
	return msg
}

func (e *ReplicaLostError) Unwrap() error { return e.Err }

// StageError is an engine's failure in one stage of a request.
type StageError struct {
	Stage   int
	Name    string
	Replica string
	Err     error
}

func (e *StageError) Error() string {
	return fmt.Sprintf("stage %d (%s): %v", e.Stage, e.Name, e.Err)
}

func (e *StageError) Unwrap() error { return e.Err }

// errAborted and errClientGone are the causes an abort cancels a request with.
var (
	errAborted    = &Error{Code: CodeAborted, Msg: "request aborted"}
	errClientGone = &Error{Code: CodeAborted, Msg: "request aborted: the client went away"}
	errShutdown   = &Error{Code: CodeUnavailable, Msg: "server shutting down"}
)

// CodeOf classifies any error the orchestrator or an engine returns. It is
// the one place where context errors and engine errors become codes.
func CodeOf(err error) Code {
	if err == nil {
		return codeUnclassified
	}
	var (
		e   *Error
		rl  *ReplicaLostError
		se  *pipeline.SelectError
		pe  *engine.ParamError
		ie  *engine.InputError
		stg *StageError
		mb  *membudget.BusyError
		ue  *engine.UpstreamError
	)
	switch {
	case errors.As(err, &rl):
		return CodeReplicaLost
	case errors.As(err, &se), errors.As(err, &pe), errors.As(err, &ie):
		return CodeBadRequest
	case errors.As(err, &e):
		return e.Code
	case errors.As(err, &mb):
		return CodeOverloaded
	case errors.As(err, &ue):
		return CodeUpstream
	case errors.As(err, &stg) && errors.Is(stg.Err, engine.ErrReplicaLost):
		// The engine's own report of its replica's loss, which reached
		// the request before the pool's (ReplicaLostError).
		return CodeReplicaLost
	case errors.As(err, &stg):
		return CodeStageFailed
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadline
	case errors.Is(err, context.Canceled):
		return CodeAborted
	}
	return CodeInternal
}
