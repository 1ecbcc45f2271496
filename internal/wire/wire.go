// Package wire holds the JSON shapes of omnistage's HTTP API that both the
// server and its clients (the reference coordinator, the remote engine) use.
package wire

import (
	"encoding/json"

	"github.com/omnistage/omnistage/internal/engine"
)

// RunRequest is the body of POST /v1/run.
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
}

// Prompt is stage 0's stage_input.
type Prompt struct {
	Text string `json:"text"`
}

// RunResponse is the answer of POST /v1/run. When Finished is false,
// StageID names the stage that must receive StageInput next; when true,
// Output holds every output the request selected.
type RunResponse struct {
	RequestID  string  `json:"request_id"`
	StageID    int     `json:"stage_id"`
	Finished   bool    `json:"finished"`
	StageInput string  `json:"stage_input,omitempty"`
	Output     *Output `json:"output,omitempty"`
}

// Output is a request's selected outputs, by modality.
type Output struct {
	Audio      *Audio        `json:"audio,omitempty"`
	Timestamps []engine.Word `json:"timestamps,omitempty"`
	Text       string        `json:"text,omitempty"`
}

// Audio is a complete audio output: a WAV file, base64 in JSON.
type Audio struct {
	Format     string `json:"format"` // "wav"
	SampleRate int    `json:"sample_rate"`
	DurationMs int    `json:"duration_ms"`
	Data       []byte `json:"data"`
}
