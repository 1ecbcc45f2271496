// Package stageproto is the omnistage stage protocol (docs/stage-protocol.md),
// both sides: the framing of its messages (a JSON header line, then the
// data it announces), the messages, and the conversion of engine chunks to
// and from them. Package engine/external is the runtime's side of a
// connection; package testkit/stageprog a program's side, in Go, for test
// stages.
package stageproto

// Version is the protocol version this package speaks.
const Version = 1

// Limits of the framing.
const (
	// MaxHeader bounds a header line, its line feed included.
	MaxHeader = 64 << 10
	// MaxData bounds the data of one message.
	MaxData = 16 << 20
)

// The message types.
const (
	TypeHello     = "hello"
	TypeWarm      = "warm"
	TypeReady     = "ready"
	TypeCheck     = "check"
	TypeChecked   = "checked"
	TypeJob       = "job"
	TypeBatch     = "batch"
	TypeInput     = "input"
	TypeInputEnd  = "input_end"
	TypeOutput    = "output"
	TypeDone      = "done"
	TypeError     = "error"
	TypeCredit    = "credit"
	TypeCancel    = "cancel"
	TypeCancelled = "cancelled"
	TypeShutdown  = "shutdown"
)

// The codes of a job's error message.
const (
	CodeBadParams = "bad_params"
	CodeBadInput  = "bad_input"
	CodeFailed    = "failed"
)

// Defaults of the hello message's fields.
const (
	DefaultMaxJobs = 1
	DefaultWindow  = 8
)
