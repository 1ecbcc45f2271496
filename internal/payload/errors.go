package payload

import "fmt"

// The codes of Error. Each names one way a payload can be unusable; all of
// them are the sender's problem (HTTP 4xx): payload_too_large is a 413, the
// others are 400s. The codes are stable: clients and tests match on them.
const (
	// CodeNotBase64: the string is not URL-safe base64 without padding.
	CodeNotBase64 = "payload_not_base64"
	// CodeTooLarge: the payload is larger than the codec's limit.
	CodeTooLarge = "payload_too_large"
	// CodeBadMagic: the bytes are not an omnistage payload at all.
	CodeBadMagic = "payload_bad_magic"
	// CodeUnsupportedVersion: an omnistage payload of another format version
	// (or with header flags this version does not define).
	CodeUnsupportedVersion = "payload_unsupported_version"
	// CodeSignatureMissing: the codec has a key but the payload is unsigned.
	CodeSignatureMissing = "payload_signature_missing"
	// CodeSignatureInvalid: the payload's HMAC does not match its bytes.
	CodeSignatureInvalid = "payload_signature_invalid"
	// CodeUndecodable: the body is not the msgpack envelope of this version.
	CodeUndecodable = "payload_undecodable"
	// CodeMissingField: a required field is absent or empty.
	CodeMissingField = "payload_missing_field"
	// CodeOutOfRange: a stage id or a length does not fit the pipeline.
	CodeOutOfRange = "payload_out_of_range"
	// CodeWrongStage: the payload is addressed to another stage.
	CodeWrongStage = "payload_wrong_stage"
	// CodeWrongPipeline: the payload was made by another pipeline, or by
	// another configuration (stages or route) of this one.
	CodeWrongPipeline = "payload_wrong_pipeline"
	// CodeBadChunk: a data chunk is structurally invalid.
	CodeBadChunk = "payload_bad_chunk"
)

// Error is a payload that cannot be used, and why. Code is one of the Code
// constants; Message is a sentence a person can act on. Every error that
// Codec.Decode returns for bad input is an *Error; an error of another type
// means the caller misused the package (a bug, an HTTP 500).
type Error struct {
	Code    string
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

func newError(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
