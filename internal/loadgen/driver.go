package loadgen

// What a load runs against (Driver, Stream), and the error codes of its
// requests.

import (
	"context"
	"errors"
	"fmt"
)

// Driver sends requests to the system under load. Its methods may be
// called concurrently.
type Driver interface {
	// Start sends a request with the given id to speak text and returns
	// its audio stream once the answer starts. Cancelling ctx aborts the
	// request as a client hanging up would, at any time, also after Start
	// returned.
	Start(ctx context.Context, id, text string) (Stream, error)
	// Abort aborts the request with id as DELETE /v1/requests/{id} does,
	// and returns once it has drained: nil when it did, ErrNotFound when
	// no request of that id was active (it had ended).
	Abort(ctx context.Context, id string) error
	// Held reports whether the server still holds id (GET
	// /v1/requests/{id}): a request of that id is active or draining.
	Held(ctx context.Context, id string) (bool, error)
	// Leaks returns the system's requests in flight and bindings held now.
	Leaks(ctx context.Context) (Leaks, error)
}

// Stream is the audio of one request.
type Stream interface {
	// Next waits for more audio and returns how many samples came, and
	// their rate. It returns io.EOF once the stream has ended cleanly,
	// never together with samples.
	Next(ctx context.Context) (samples, rate int, err error)
	// Close hangs up if the stream has not ended, without waiting for the
	// server to notice. It may be called more than once.
	Close()
}

// ErrNotFound is Driver.Abort's error for an id no request holds.
var ErrNotFound = errors.New("no active request with that id")

// Error is a failure that the system under load reported with a code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Msg) }

// The codes the load generator gives failures the system did not classify.
const (
	CodeTimeout     = "timeout"
	CodeTransport   = "transport"
	CodeBadResponse = "bad_response"
	CodeInterrupted = "interrupted"
)

// codeOf classifies a request's failure: err is what the driver returned,
// rctx the request's context and run the run's.
func codeOf(run, rctx context.Context, err error) string {
	var e *Error
	switch {
	case run.Err() != nil:
		return CodeInterrupted
	case errors.As(err, &e):
		return e.Code
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return CodeTimeout
	}
	return CodeTransport
}
