package payload

// Envelope, what one stage hands the next, and Expect, what the server
// that reads it knows.

import (
	"encoding/json"

	"github.com/omnistage/omnistage/internal/engine"
)

// FormatVersion is the payload format this package writes and the only one
// it reads: the version byte of every payload's header and the "v" of every
// envelope, in payloads and in stream header frames.
const FormatVersion = 3

// Envelope is everything one stage hands to the next through POST /v1/run.
// It is self-contained: the server that receives it needs nothing else about
// the request. Its wire keys are listed in docs/payload.md.
//
// Slices are shared, not copied: an Envelope built with Next refers to the
// params, outputs and chunks of the one it was built from. Like chunks (see
// package engine), an envelope's slices are not modified once it is built.
type Envelope struct {
	// Version is the format version. Encode and a StreamWriter write
	// FormatVersion whatever it holds (they refuse any other non-zero
	// value); Decode and a StreamReader set it.
	Version int
	// Pipeline is the name of the pipeline.
	Pipeline string
	// Digest identifies the pipeline's stages and route (the pipeline
	// package computes it); a payload is only accepted by a server whose
	// pipeline has the same digest.
	Digest [32]byte
	// TransferID identifies the request's chain of payloads; it stays the
	// same from the entry stage to the final one.
	TransferID string
	// RequestID is the caller's request id.
	RequestID string
	// Trace is the W3C traceparent of the request, so that the trace
	// crosses the hop; empty when there is none. The package does not
	// interpret it.
	Trace string
	// From is the id of the stage that produced Data.
	From int
	// To is the id of the stage that must run next.
	To int
	// Params is the request's whole sampling_params array, indexed by stage
	// id (the aligner's entry at index n), normalized to one entry per stage
	// id; a nil entry or JSON null means the stage's defaults. Each entry is
	// a JSON object or null.
	Params []json.RawMessage
	// Prompt is the request's original input, for the stages after the
	// entry stage that need it (the aligner needs the transcript).
	Prompt engine.Prompt
	// Outputs are the request's selected output modalities (engine kinds).
	Outputs []string
	// Final is the id of the request's final stage: the route runs as far
	// as this stage.
	Final int
	// Carried are selected outputs of stages before From that must reach
	// the final answer, at most one per kind (see Carry).
	Carried []StageOutput
	// Data is the output of stage From: the input of stage To. All its
	// chunks have the same kind.
	Data []engine.Chunk
}

// StageOutput is the whole output of one stage.
type StageOutput struct {
	// Stage is the id of the stage that produced it.
	Stage int
	// Kind is the kind of every chunk in Chunks.
	Kind engine.Kind
	// Chunks are the stage's output stream, in order.
	Chunks []engine.Chunk
}

// Expect is what the server decoding a payload knows: its pipeline and the
// stage it runs. Codec.Decode refuses a payload that does not fit it;
// StreamReader.Header refuses such a stream.
type Expect struct {
	// Pipeline is the pipeline's name.
	Pipeline string
	// Digest is the pipeline's digest; it must equal the payload's.
	Digest [32]byte
	// Stage is the id of the stage this server runs; the payload's To must
	// be this stage. For a result stream (FrameResult), it is the stage
	// whose output the stream holds: the header's From.
	Stage int
	// NumStages is the number of stage ids, the aligner included (n + 1
	// when the pipeline has an aligner). Stage ids in the payload must be
	// in 0..NumStages-1.
	NumStages int
	// NumParams is the required length of the payload's Params; 0 means
	// NumStages.
	NumParams int
	// Input is the kind stage Stage takes; when set, every chunk of Data
	// (every data frame of a stream) must be of this kind. For a result
	// stream it is the kind of stage Stage's output.
	Input engine.Kind
}

// paramsFor returns the sampling params of stage id, or nil for the
// defaults (no entry, nil or JSON null).
func (e *Envelope) paramsFor(id int) json.RawMessage {
	if id < 0 || id >= len(e.Params) || isNull(e.Params[id]) {
		return nil
	}
	return e.Params[id]
}

// Carry returns the outputs that must travel beyond stage e.To: e.Carried
// and, when keep is true, e.Data as the output of stage e.From. The caller
// sets keep when e.From's output is one of the request's selected outputs
// (its kind is in e.Outputs and the stage is marked final_output). An output
// replaces an earlier one of the same kind, so the answer holds the last
// stage's audio when several stages produce audio. An empty e.Data adds
// nothing. The final stage answers with Carry(keep) plus its own output.
func (e *Envelope) Carry(keep bool) []StageOutput {
	if !keep || len(e.Data) == 0 {
		return e.Carried
	}
	kept := StageOutput{Stage: e.From, Kind: e.Data[0].Kind(), Chunks: e.Data}
	out := make([]StageOutput, 0, len(e.Carried)+1)
	for _, o := range e.Carried {
		if o.Kind != kept.Kind {
			out = append(out, o)
		}
	}
	return append(out, kept)
}

// Next returns the envelope that takes data, the output of stage e.To, to
// stage to. Everything that travels along the chain is kept; keep is as for
// Carry. e is not modified.
func (e *Envelope) Next(to int, data []engine.Chunk, keep bool) *Envelope {
	n := *e
	n.Version = FormatVersion
	n.From, n.To = e.To, to
	n.Carried = e.Carry(keep)
	n.Data = data
	return &n
}

func isNull(m json.RawMessage) bool {
	return len(m) == 0 || string(m) == "null"
}
