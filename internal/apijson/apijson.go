// Package apijson holds the JSON shapes of omnistage's HTTP API that both
// the server and its clients use, and the rendering of engine outputs into
// them. The shapes of POST /v1/run are package hop's.
package apijson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// Outputs are a request's selected outputs, by modality. Timestamps is
// present (possibly empty) whenever the timestamps output was selected.
type Outputs struct {
	Audio      *Audio        `json:"audio,omitempty"`
	Timestamps []engine.Word `json:"timestamps,omitzero"`
	Text       string        `json:"text,omitempty"`
	// Regions is present (possibly empty) whenever the regions output was
	// selected.
	Regions []Region `json:"regions,omitzero"`
}

// Audio is audio in JSON. In a complete output Format is "wav" and Data is
// a whole WAV file (16-bit mono PCM); in a streamed chunk Format is "pcm"
// and Data is raw 16-bit little-endian mono samples. Both are base64 in
// JSON.
type Audio struct {
	Format     string `json:"format"`
	SampleRate int    `json:"sample_rate"`
	DurationMs int    `json:"duration_ms"`
	Data       []byte `json:"data"`
}

// The Audio formats.
const (
	FormatWAV = "wav"
	FormatPCM = "pcm"
)

// ErrorBody is the OpenAI error shape every error response uses:
// {"error": {"message", "type", "code"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// Input is the input of POST /v1/generate: in JSON either a string or a
// prompt object {"text": "..."} or, for a pipeline that reads images,
// {"image": "..."}: the image file's bytes in base64, or as a data: URL.
// It marshals as the object.
type Input struct {
	Text  string `json:"text,omitempty"`
	Image string `json:"image,omitempty"`
}

// UnmarshalJSON accepts a string or a {"text": ...} or {"image": ...}
// object and nothing else.
func (in *Input) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &in.Text)
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New(`input must be a string, an object {"text": "..."} or an object {"image": "<base64>"}`)
	}
	type plain Input
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf(`input object: %w (want {"text": "..."} or {"image": "<base64>"})`, err)
	}
	if p.Text != "" && p.Image != "" {
		return errors.New("input has both text and an image: send one of them")
	}
	*in = Input(p)
	return nil
}

// StreamMode is how POST /v1/generate streams its answer. In JSON it is
// false or absent (not streamed), true or "ndjson" (one JSON event per
// line), or "sse" (server-sent events).
type StreamMode string

// The stream modes.
const (
	StreamOff    StreamMode = ""
	StreamNDJSON StreamMode = "ndjson"
	StreamSSE    StreamMode = "sse"
)

// UnmarshalJSON accepts false, true, null, "ndjson" and "sse".
func (m *StreamMode) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "false", "null":
		*m = StreamOff
	case "true", `"ndjson"`:
		*m = StreamNDJSON
	case `"sse"`:
		*m = StreamSSE
	default:
		return fmt.Errorf(`stream must be false, true, "ndjson" or "sse", not %s`, b)
	}
	return nil
}

// MarshalJSON writes false, "ndjson" or "sse".
func (m StreamMode) MarshalJSON() ([]byte, error) {
	if m == StreamOff {
		return []byte("false"), nil
	}
	return json.Marshal(string(m))
}

// GenerateRequest is the body of POST /v1/generate. SamplingParams is
// indexed by stage id (null entries mean defaults); RequestID may also come
// in the X-Request-Id header.
type GenerateRequest struct {
	// Model names the pipeline; empty means the server's default.
	Model            string            `json:"model,omitempty"`
	Input            *Input            `json:"input"`
	OutputModalities []string          `json:"output_modalities,omitempty"`
	SamplingParams   []json.RawMessage `json:"sampling_params,omitempty"`
	RequestID        string            `json:"request_id,omitempty"`
	Stream           StreamMode        `json:"stream,omitzero"`
}

// GenerateResponse is the answer of a POST /v1/generate that is not
// streamed: every selected output in route order.
type GenerateResponse struct {
	RequestID string           `json:"request_id"`
	Outputs   []GenerateOutput `json:"outputs"`
	// Notes are what the stages said of the answer that is not an error
	// (text a talker had nothing to speak of).
	Notes []Note `json:"notes,omitempty"`
}

// Note is one stage's note of a request.
type Note struct {
	Stage   int    `json:"stage"`
	Message string `json:"message"`
}

// GenerateOutput is one selected output. Finished is true for the final
// stage's output and false for intermediate outputs the request also
// selected. Exactly one of the Output fields is set, by what the stage
// produced: Audio (a WAV file), Timestamps or Text.
type GenerateOutput struct {
	Stage    int    `json:"stage"`
	Modality string `json:"modality"`
	Finished bool   `json:"finished"`
	Outputs
}

// The Event types of a streamed POST /v1/generate.
const (
	EventOutput = "output" // one chunk of a selected output
	EventDone   = "done"   // the request ended; always the last event
	EventError  = "error"  // the request failed; always the last event
)

// Event is one event of a streamed POST /v1/generate: one NDJSON line, or
// the data of one server-sent event. An "output" event carries one chunk:
// Audio (Format "pcm"), Timestamps or Text, with Final set when the chunk
// belongs to the final stage's output. The stream ends with one "done" or
// one "error" event.
type Event struct {
	Type      string       `json:"type"`
	RequestID string       `json:"request_id"`
	Stage     *int         `json:"stage,omitempty"`
	Modality  string       `json:"modality,omitempty"`
	Final     bool         `json:"final,omitempty"`
	Error     *ErrorDetail `json:"error,omitempty"`
	// Stages is each stage's timeline, and Notes the stages' notes, on
	// the done event.
	Stages []StageTiming `json:"stages,omitzero"`
	Notes  []Note        `json:"notes,omitempty"`
	Outputs
}

// StageTiming is one stage's part of a request, in milliseconds since it
// was submitted: when a replica was bound (the wait for one included),
// when the engine started, sent its first output (-1 if it sent none)
// and returned.
type StageTiming struct {
	Stage         int     `json:"stage"`
	Name          string  `json:"name"`
	Replica       string  `json:"replica"`
	BoundMs       float64 `json:"bound_ms"`
	StartMs       float64 `json:"start_ms"`
	FirstOutputMs float64 `json:"first_output_ms"`
	EndMs         float64 `json:"end_ms"`
}

// SpeechRequest is the body of POST /v1/audio/speech, OpenAI's shape.
// Instructions is accepted and ignored.
type SpeechRequest struct {
	Model          string   `json:"model"`
	Input          string   `json:"input"`
	Voice          Voice    `json:"voice,omitzero"`
	ResponseFormat string   `json:"response_format,omitempty"`
	Speed          *float64 `json:"speed,omitempty"`
	Instructions   string   `json:"instructions,omitempty"`
	StreamFormat   string   `json:"stream_format,omitempty"`
}

// The SpeechEvent types, OpenAI's, plus speech.word_timestamps.
const (
	SpeechDelta      = "speech.audio.delta"
	SpeechDone       = "speech.audio.done"
	SpeechTimestamps = "speech.word_timestamps"
	SpeechStages     = "speech.stages"
	SpeechError      = "error"
)

// SpeechEvent is the data of one server-sent event of POST
// /v1/audio/speech with stream_format "sse". A delta carries Audio, raw
// 16-bit little-endian mono PCM (base64 in JSON); speech.word_timestamps
// carries Words; speech.audio.done carries Usage and is the last event
// unless an error event ends the stream.
type SpeechEvent struct {
	Type   string        `json:"type"`
	Audio  []byte        `json:"audio,omitempty"`
	Words  []engine.Word `json:"words,omitzero"`
	Stages []StageTiming `json:"stages,omitzero"`
	Usage  *SpeechUsage  `json:"usage,omitempty"`
	Error  *ErrorDetail  `json:"error,omitempty"`
}

// SpeechUsage is the usage of speech.audio.done. InputTokens counts the
// input's characters (Unicode code points, what OpenAI's tts-1 bills);
// OutputTokens is 0, since no audio tokens exist here; AudioDurationMs is
// the length of the audio sent.
type SpeechUsage struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	TotalTokens     int `json:"total_tokens"`
	AudioDurationMs int `json:"audio_duration_ms"`
}

// RequestState is the answer of GET and DELETE /v1/requests/{id}.
type RequestState struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// ModelList is the answer of GET /v1/models, OpenAI's list shape.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
}

// Model is one entry of ModelList: OpenAI's fields, then what omnistage
// adds about a pipeline (none of it for an alias, which names the pipeline
// it stands for in AliasOf).
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// AliasOf is the pipeline an alias (tts-1, ...) stands for.
	AliasOf string `json:"alias_of,omitempty"`
	// Input is the kind of input the pipeline takes (text).
	Input string `json:"input,omitempty"`
	// Outputs are the output modalities a request may select.
	Outputs []string `json:"outputs,omitempty"`
	// WordTimestamps is true when the pipeline has an aligner.
	WordTimestamps bool `json:"word_timestamps,omitempty"`
	// Voices are the ids of the voices its talker speaks.
	Voices []string `json:"voices,omitempty"`
	// Ready is false while the pipeline cannot take requests (warming
	// up, or failed to start).
	Ready *bool `json:"ready,omitempty"`
}

// AudioModels is the answer of GET /v1/audio/models, the shape Open WebUI
// reads: the models a speech request may name.
type AudioModels struct {
	Models []AudioModel `json:"models"`
}

// AudioModel is one entry of AudioModels.
type AudioModel struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Status is the answer of GET /health and GET /ready when all is well.
type Status struct {
	Status string `json:"status"`
	// Unavailable names, on /ready, the pipelines that failed to start
	// (serve --start-partial), each with why: the server serves the
	// others, and these never will be ready.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// Voice is the voice of a speech request: a name, sent as a string or, as
// OpenAI now allows, as an object {"id": "name"}.
type Voice struct {
	ID string
}

// UnmarshalJSON accepts "name" or {"id": "name"}.
func (v *Voice) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.ID)
	}
	var obj struct {
		ID *string `json:"id"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil || obj.ID == nil {
		return errors.New(`voice must be a name or an object {"id": "name"}`)
	}
	v.ID = *obj.ID
	return nil
}

// MarshalJSON writes the name.
func (v Voice) MarshalJSON() ([]byte, error) { return json.Marshal(v.ID) }

// VoiceList is the answer of GET /v1/audio/voices: the talker's voices,
// then the aliases, each naming the voice it stands for.
type VoiceList struct {
	Voices []VoiceEntry `json:"voices"`
}

// VoiceEntry is one voice or alias.
type VoiceEntry struct {
	engine.Voice
	// AliasOf names the voice an alias stands for; empty for a voice.
	AliasOf string `json:"alias_of,omitempty"`
}
