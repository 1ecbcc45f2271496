package payload

// The payload stream format that both directions of a streamed /v1/run
// share: its version and framing, the kinds of frame, the error frame's
// content, and what makes a header frame valid.

import (
	"fmt"
	"unicode/utf8"
)

// StreamVersion is the payload stream format this package writes and the
// only one it reads: the version byte of every stream's preamble.
const StreamVersion = 2

const (
	streamMagic  = "OSTS"
	preambleLen  = len(streamMagic) + 2 + stampLen + nonceLen // magic, version, flags, key id, issued at, nonce
	frameHeadLen = 5                                          // kind, body length
	// minGrow is the step in which a frame body's buffer grows beyond what
	// it already holds: a frame's claimed length is only an upper bound
	// until its bytes arrive.
	minGrow = 64 << 10
)

// FrameKind is the kind of a stream frame, its first byte.
type FrameKind byte

// The frame kinds.
const (
	// FrameHandOff is a header: the data frames that follow are the output
	// of stage From and the input of stage To.
	FrameHandOff FrameKind = 'H'
	// FrameResult is a header: the data frames that follow are the output
	// of stage From (equal to To), the request's final output.
	FrameResult FrameKind = 'R'
	// FrameData holds one chunk.
	FrameData FrameKind = 'D'
	// FrameError ends a stream with an error (a StreamError).
	FrameError FrameKind = 'X'
	// FrameEnd ends a stream that is complete.
	FrameEnd FrameKind = 'E'
)

// String names k for messages.
func (k FrameKind) String() string {
	switch k {
	case FrameHandOff:
		return "hand-off header"
	case FrameResult:
		return "result header"
	case FrameData:
		return "data"
	case FrameError:
		return "error"
	case FrameEnd:
		return "end"
	}
	return fmt.Sprintf("unknown (0x%02x)", byte(k))
}

// StreamError is the content of a stream's error frame: the stage that
// writes the stream failed after the stream began. Status is an HTTP
// status (400..599), Code a machine-readable code (may be empty) and
// Message a sentence a person can act on (not empty).
type StreamError struct {
	Status  int
	Code    string
	Message string
}

// Error returns the message.
func (e *StreamError) Error() string { return e.Message }

// problem describes what is wrong with e, or returns "".
func (e *StreamError) problem() string {
	switch {
	case e.Status < 400 || e.Status > 599:
		return fmt.Sprintf("status %d; want 400..599", e.Status)
	case !utf8.ValidString(e.Code) || !utf8.ValidString(e.Message):
		return "a code or message that is not valid UTF-8"
	}
	if name := firstEmpty(errorSchema, e); name != "" {
		return "no " + name
	}
	return ""
}

type streamState int

const (
	beforeHeader streamState = iota
	inData
	ended
)

// headerProblem reports what makes e, the envelope of a header frame of
// kind, invalid whatever the server: the checks of Envelope.validate, no
// data, and for a result header To equal to From.
func headerProblem(kind FrameKind, e *Envelope) *Error {
	if kind != FrameHandOff && kind != FrameResult {
		return newError(CodeBadFrame, "a stream header is a %s or %s frame, not a %s frame", FrameHandOff, FrameResult, kind)
	}
	if err := e.validate(); err != nil {
		return err
	}
	if len(e.Data) != 0 || len(e.Carried) != 0 {
		return newError(CodeBadFrame, "payload stream header holds %d data chunks and %d carried outputs; a header holds neither, data follows in data frames", len(e.Data), len(e.Carried))
	}
	if kind == FrameResult && e.To != e.From {
		return newError(CodeBadFrame, "payload stream result header has from %d and to %d; a result header's to is its from", e.From, e.To)
	}
	return nil
}
