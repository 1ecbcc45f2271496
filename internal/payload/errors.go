package payload

// Error and its codes: each way a payload or a payload stream can be
// unusable, and the sizes its messages quote.

import "fmt"

// The codes of Error. Each names one way a payload or a payload stream can
// be unusable; all of them are the sender's problem (HTTP 4xx):
// payload_too_large is a 413, the others are 400s. The codes are stable:
// clients and tests match on them. docs/payload.md lists them too
// (TestDocErrorCodes checks that it lists exactly these).
const (
	// CodeNotBase64: the string is not URL-safe base64 without padding.
	CodeNotBase64 = "payload_not_base64"
	// CodeTooLarge: the payload, or a frame of a stream, is larger than the
	// codec's limit.
	CodeTooLarge = "payload_too_large"
	// CodeBadMagic: the bytes are not an omnistage payload (or stream) at
	// all.
	CodeBadMagic = "payload_bad_magic"
	// CodeUnsupportedVersion: an omnistage payload or stream of another
	// format version (or with header flags this version does not define).
	CodeUnsupportedVersion = "payload_unsupported_version"
	// CodeSignatureMissing: the codec has a key but the payload or stream is
	// unsigned.
	CodeSignatureMissing = "payload_signature_missing"
	// CodeSignatureInvalid: a tag does not match: the payload or a frame
	// was altered, the frames of a stream were reordered, dropped,
	// duplicated or taken from another stream, or the key differs.
	CodeSignatureInvalid = "payload_signature_invalid"
	// CodeUndecodable: a body is not the msgpack of this version (or, for
	// package stageserver, a stream is not what a /v1/run request stream must be).
	CodeUndecodable = "payload_undecodable"
	// CodeMissingField: a required field is absent or empty.
	CodeMissingField = "payload_missing_field"
	// CodeOutOfRange: a stage id or a length does not fit the pipeline (or,
	// for package stageserver, the payload does not fit its request's route).
	CodeOutOfRange = "payload_out_of_range"
	// CodeWrongStage: the payload or stream is addressed to another stage.
	CodeWrongStage = "payload_wrong_stage"
	// CodeWrongPipeline: the payload was made by another pipeline, or by
	// another configuration (stages or route) of this one.
	CodeWrongPipeline = "payload_wrong_pipeline"
	// CodeBadChunk: a data chunk is structurally invalid, or not of the
	// kind of its stream or of the stage that takes it.
	CodeBadChunk = "payload_bad_chunk"
	// CodeKeyUnknown: the payload or stream is signed with a key (named
	// by its KeyID) that the codec's ring does not hold.
	CodeKeyUnknown = "payload_key_unknown"
	// CodeExpired: the payload or stream was issued longer ago than the
	// codec's lifetime.
	CodeExpired = "payload_expired"
	// CodeFromFuture: the payload or stream was issued more than
	// ClockSkew in the future by the codec's clock.
	CodeFromFuture = "payload_from_future"
	// CodeTruncated: a stream ends before its end or error frame, at a
	// frame boundary or inside a frame. The peer went away or cut the
	// stream; Err is io.ErrUnexpectedEOF (or the reader's own error that
	// said so), so a caller can treat it as a lost peer.
	CodeTruncated = "payload_truncated"
	// CodeBadFrame: a stream's frames break its grammar: an unknown frame
	// kind, a stream that does not start with exactly one header frame, a
	// header frame with data, an end frame with a body, or bytes after the
	// end or error frame.
	CodeBadFrame = "payload_bad_frame"
)

// Error is a payload that cannot be used, and why. Code is one of the Code
// constants; Message is a sentence a person can act on; Err, when not nil,
// is the error that caused it (for CodeTruncated, io.ErrUnexpectedEOF or
// the reader's error). Every error that Codec.Decode and a StreamReader
// return for bad input is an *Error; an error of another type
// means the caller misused the package (a bug, an HTTP 500) or, for a
// stream, that its reader failed.
type Error struct {
	Code    string
	Message string
	Err     error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// size formats a byte count for a person.
func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
