package hop

// The names both sides of /v1/run share: its path, the media type and
// headers of the streamed form, and the one-shot JSON bodies.

import (
	"encoding/json"
	"mime"

	"github.com/omnistage/omnistage/internal/apijson"
)

// Path is the path of the one-stage endpoint.
const Path = "/v1/run"

// EntryStage is the stage every route starts at, the one that takes a
// prompt.
const EntryStage = 0

// ContentType is the media type of a streamed /v1/run body, in either
// direction: a payload stream (see package payload).
const ContentType = "application/vnd.omnistage.stream"

// The response headers of a streamed answer. They say, before the body,
// what the one-shot answer says in its JSON fields.
const (
	// HeaderStage is the stage that must receive the answer's stream next
	// (not finished), or the stage that ran (finished): stage_id.
	HeaderStage = "X-Omnistage-Stage"
	// HeaderFinished is "true" when the answer's stream is the request's
	// final output, "false" when it is a hand-off to HeaderStage.
	HeaderFinished = "X-Omnistage-Finished"
	// HeaderOutput, when present, names the kind of the stream's data and
	// says that the request selected it as an output: a coordinator keeps
	// the data frames of every answer that carries it.
	HeaderOutput = "X-Omnistage-Output"
	// HeaderPipeline, on a request, names the pipeline whose stage the call
	// runs, for a server that serves several (the payload must be that
	// pipeline's all the same).
	HeaderPipeline = "X-Omnistage-Pipeline"
)

// IsStream reports whether a Content-Type is ContentType.
func IsStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == ContentType
}

// RunRequest is the JSON body of POST /v1/run.
//
// For stage 0, StageInput is a prompt object ({"text": "..."}) and
// SamplingParams, RequestID and OutputModalities describe the whole request.
// For a later stage, StageInput is the opaque string a previous answer
// returned; everything else travels inside it, and the other fields must be
// absent.
type RunRequest struct {
	StageID          *int              `json:"stage_id"`
	StageInput       json.RawMessage   `json:"stage_input"`
	SamplingParams   []json.RawMessage `json:"sampling_params,omitempty"`
	RequestID        string            `json:"request_id,omitempty"`
	OutputModalities []string          `json:"output_modalities,omitempty"`
	// Finished is accepted so that a non-final answer can be posted back
	// unchanged (routers that chain steps by posting each answer to the
	// next step); it must be false.
	Finished *bool `json:"finished,omitempty"`
}

// EntryInput is stage 0's stage_input: {"text": "..."}, or, as vLLM-Omni's
// clients send it, {"prompt": "..."}, or, for a pipeline that reads
// images, {"image": "..."}: the image file in base64, or a data: URL.
type EntryInput struct {
	Text   string  `json:"text,omitempty"`
	Prompt *string `json:"prompt,omitempty"`
	Image  string  `json:"image,omitempty"`
}

// RunResponse is the JSON answer of POST /v1/run. When Finished is false,
// StageID names the stage that must receive StageInput next; when true,
// StageID is the stage that ran and Output holds every output the request
// selected.
type RunResponse struct {
	RequestID  string           `json:"request_id"`
	StageID    int              `json:"stage_id"`
	Finished   bool             `json:"finished"`
	StageInput string           `json:"stage_input,omitempty"`
	Output     *apijson.Outputs `json:"output,omitempty"`
}
