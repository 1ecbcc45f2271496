package stageproto

// The messages: one Header type that every message decodes into, and the
// shapes each message is written with.

import (
	"encoding/json"

	"github.com/omnistage/omnistage/internal/engine"
)

// Header is a message's header, any type: the fields a type does not use
// are zero. See docs/stage-protocol.md for what each type holds.
type Header struct {
	Type       string `json:"type"`
	DataLength int    `json:"data_length"`

	// hello
	Protocol int            `json:"protocol"`
	Name     string         `json:"name"`
	Input    string         `json:"input"`
	Output   string         `json:"output"`
	MaxJobs  int            `json:"max_jobs"`
	MaxBatch int            `json:"max_batch"`
	Voices   []engine.Voice `json:"voices"`
	// Window is hello's input window, or the output window of job's job
	// or of each of batch's.
	Window int `json:"window"`
	// Params are hello's descriptions of the params a program takes, or
	// the params of check and job.
	Params json.RawMessage `json:"params"`

	// warm
	Config json.RawMessage `json:"config"`

	// check and checked
	ID    int64       `json:"id"`
	Fault *ParamFault `json:"error"`

	// job, and every message of one
	Job       int64  `json:"job"`
	RequestID string `json:"request_id"`
	StageID   int    `json:"stage_id"`
	Prompt    string `json:"prompt"`

	// input and output: the chunk's kind and its fields
	ChunkHeader

	// batch
	Jobs []BatchJob `json:"jobs"`

	// credit
	Chunks int `json:"chunks"`

	// error
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

// ChunkHeader is the header fields of a chunk (docs/stage-protocol.md,
// Kinds and chunks).
type ChunkHeader struct {
	Kind          string            `json:"kind,omitempty"`
	SampleRate    int               `json:"sample_rate,omitempty"`
	EndOfSentence bool              `json:"end_of_sentence,omitempty"`
	Words         []engine.Word     `json:"words,omitempty"`
	Voice         string            `json:"voice,omitempty"`
	Channels      int               `json:"channels,omitempty"`
	StrChannels   int               `json:"str_channels,omitempty"`
	FrameShift    float32           `json:"frame_shift,omitempty"`
	Names         []string          `json:"names,omitempty"`
	Ends          []float32         `json:"ends,omitempty"`
	Cluster       []bool            `json:"cluster,omitempty"`
	TargetPos     []float32         `json:"target_pos,omitempty"`
	TargetF0      []float32         `json:"target_f0,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`
	Tensors       []TensorField     `json:"tensors,omitempty"`
	Format        string            `json:"format,omitempty"`
	Width         int               `json:"width,omitempty"`
	Height        int               `json:"height,omitempty"`
	Regions       []RegionField     `json:"regions,omitempty"`
}

// TensorField describes one tensor of a tensor chunk; its elements are
// in the chunk's data, after those of the tensors before it.
type TensorField struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// RegionField is one region of a regions chunk; its crop's pixels are in
// the chunk's data, after those of the crops of the regions before it.
type RegionField struct {
	Index int `json:"index"`
	// Box is four [x, y] corners.
	Box        [][]float32 `json:"box"`
	Score      float32     `json:"score"`
	Crop       *CropField  `json:"crop,omitempty"`
	Rotated    bool        `json:"rotated,omitempty"`
	Text       string      `json:"text,omitempty"`
	Confidence []float32   `json:"confidence,omitempty"`
}

// CropField is the size of a region's crop.
type CropField struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// BatchJob is one job of a batch message: a job message's fields, and
// the fields and data length of its one input chunk.
type BatchJob struct {
	Job       int64           `json:"job"`
	RequestID string          `json:"request_id"`
	StageID   int             `json:"stage_id"`
	Params    json.RawMessage `json:"params"`
	Prompt    string          `json:"prompt"`
	ChunkHeader
	DataLength int `json:"data_length,omitempty"`
}

// ParamFault is a param a program refuses: checked's error.
type ParamFault struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// ParamInfo describes one param in hello.
type ParamInfo struct {
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
}

// The shapes messages are written with.
type (
	// Hello is a program's first message.
	Hello struct {
		Type     string               `json:"type"`
		Protocol int                  `json:"protocol"`
		Name     string               `json:"name,omitempty"`
		Input    string               `json:"input"`
		Output   string               `json:"output"`
		MaxJobs  int                  `json:"max_jobs,omitempty"`
		MaxBatch int                  `json:"max_batch,omitempty"`
		Window   int                  `json:"window,omitempty"`
		Params   map[string]ParamInfo `json:"params,omitempty"`
		Voices   []engine.Voice       `json:"voices,omitempty"`
	}
	// Warm asks a program to warm up.
	Warm struct {
		Type   string          `json:"type"`
		Config json.RawMessage `json:"config"`
	}
	// Check asks a program to check params.
	Check struct {
		Type   string          `json:"type"`
		ID     int64           `json:"id"`
		Params json.RawMessage `json:"params"`
	}
	// Checked answers Check.
	Checked struct {
		Type  string      `json:"type"`
		ID    int64       `json:"id"`
		Fault *ParamFault `json:"error,omitempty"`
	}
	// Job starts a job.
	Job struct {
		Type      string          `json:"type"`
		Job       int64           `json:"job"`
		RequestID string          `json:"request_id"`
		StageID   int             `json:"stage_id"`
		Params    json.RawMessage `json:"params"`
		Prompt    string          `json:"prompt"`
		Window    int             `json:"window"`
	}
	// Chunk is an input or output message's header.
	Chunk struct {
		Type string `json:"type"`
		Job  int64  `json:"job"`
		ChunkHeader
	}
	// JobEvent is a message of a job with no other field: input_end, done,
	// cancel, cancelled.
	JobEvent struct {
		Type string `json:"type"`
		Job  int64  `json:"job"`
	}
	// Credit gives chunks of credit for a job.
	Credit struct {
		Type   string `json:"type"`
		Job    int64  `json:"job"`
		Chunks int    `json:"chunks"`
	}
	// Error is a job's failure (Job set) or a program's (Job zero).
	Error struct {
		Type    string `json:"type"`
		Job     int64  `json:"job,omitempty"`
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
	}
	// Bare is a message with a type alone: ready, shutdown.
	Bare struct {
		Type string `json:"type"`
	}
)

// CreditBatch is how many chunks of a window a side takes in before it
// gives credit back: half of it, so a writer never waits long and a
// credit message serves several chunks.
func CreditBatch(window int) int { return max(window/2, 1) }
