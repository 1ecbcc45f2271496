// Package pipeline holds the pipeline and deployment configuration and the
// validated route that drives everything at run time.
//
// Loading follows one order: decode strictly (unknown keys are errors), apply
// defaults, validate (collecting every error with its file, line and field
// path), then resolve the route. Only a Config returned without error is used
// by the runtime.
package pipeline

import (
	"fmt"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// Config is one configuration file: a pipeline and how to deploy it.
type Config struct {
	// Source names where the configuration came from (a file, "builtin:tts").
	Source   string
	Pipeline Pipeline
	Deploy   Deploy
	// VoiceAliases maps voice names a client may send (OpenAI's) to the
	// talker's own voices (voice_aliases); DefaultVoiceAliases when the
	// configuration has none.
	VoiceAliases map[string]string
	// Route is the resolved route; set by Parse.
	Route *Route
}

// Pipeline declares the stages and how requests flow between them.
type Pipeline struct {
	Name  string
	Input engine.Kind
	// Kinds are the kinds the pipeline declares beyond the built-in ones
	// (kinds): opaque to the runtime, carried as engine.Data.
	Kinds  []engine.Kind
	Stages []Stage
	// Transitions are the explicit [from, to] edges; nil when omitted.
	Transitions [][2]int
	Aligner     *Aligner

	transitionLines []int
}

// Stage is one declared stage.
type Stage struct {
	ID          int
	Name        string
	Engine      string
	Input       engine.Kind
	Output      engine.Kind
	FinalOutput bool

	line int
}

// Aligner is the optional forced aligner attached after the route's tail.
// It gets stage id n (the number of declared stages).
type Aligner struct {
	Engine string
	Name   string

	line int
}

// Placement says where a stage's replicas run.
type Placement string

// The placements.
const (
	PlacementInproc  Placement = "inproc"
	PlacementProcess Placement = "process"
	PlacementRemote  Placement = "remote"
)

// Deploy says how to run the pipeline.
type Deploy struct {
	// MaxInflight bounds the requests admitted at once across the pipeline.
	MaxInflight int
	// StreamBuffer is the number of chunks buffered on each streamed edge of
	// a request: the bound that makes a slow consumer slow its producer.
	StreamBuffer int
	// AbortTimeout bounds how long an abort waits for a request's stages to
	// drain before the request is marked abort_failed.
	AbortTimeout time.Duration
	// MaxAudioSeconds bounds the audio one stage may produce for one
	// request (max_audio_seconds): past it the request fails, after at
	// most that much work, with a 400 when its text explains that much
	// audio, else a 500 (the stage's fault).
	MaxAudioSeconds int
	// MaxMigrations bounds how many times one request moves to another
	// replica of a stage after its replica was lost mid-stream
	// (max_migrations; see DeployStage.Migrate), across its stages.
	MaxMigrations int
	// Stages holds one entry per stage id (and the aligner's id), defaults
	// filled in for stages the file does not mention.
	Stages []DeployStage
}

// DeployStage is the deployment of one stage.
type DeployStage struct {
	ID        int
	Replicas  int
	Placement Placement
	Endpoints []string
	// Options are the stage engine's own options. A process replica's
	// worker applies them; for placement remote they are the stage
	// server's business (it reads them from its own configuration).
	Options engine.Options
	// MaxQueue bounds the requests waiting for a replica of this stage.
	MaxQueue int
	// MaxInflight bounds the requests one replica runs at once.
	MaxInflight int
	// Link configures the calls to a replica that runs outside this
	// process (placement process or remote); zero for placement inproc.
	Link Link
	// Worker configures a replica's worker process (placement process).
	Worker Worker
	// Batch configures the batches of an engine that computes units of
	// work of several requests in one call (engine.Batcher).
	Batch Batch
	// Migrate says that a request whose replica of this stage is lost
	// mid-stream continues on another replica (migrate; true unless the
	// file says false), where the stage's engine can replay its jobs
	// (engine.Replay).
	Migrate bool

	line       int
	path       string          // the entry's field path, for errors
	seen       map[string]bool // the keys the file gave
	engineKeys []*deployKey    // the keys given that only the engine may take (CheckEngines)
}

// Batch configures the batches of a stage whose engine batches
// (engine.Batcher): the runtime gathers the units of work of the
// requests bound to one replica into calls of at most Max items, the
// oldest waiting at most Delay for more. Max 1 turns batching off.
type Batch struct {
	// Max is the most items in one call (max_batch).
	Max int
	// Delay is the longest an item waits for a batch to fill
	// (max_batch_delay); 0: not at all.
	Delay time.Duration
}

// Link configures how a replica outside this process is called and
// watched: its YAML keys sit in the stage's deploy entry.
type Link struct {
	// Timeout bounds one call (timeout); zero means no bound beyond the
	// request's own.
	Timeout time.Duration
	// WarmTimeout bounds the wait for the replica's /ready at start-up
	// (warm_timeout).
	WarmTimeout time.Duration
	// HealthInterval is the period of the replica's /health checks
	// (health_interval).
	HealthInterval time.Duration
	// HealthFailures is the number of failed checks in a row that lose the
	// replica (health_failures).
	HealthFailures int
	// APIKeyFile names a file holding the stage servers' API key, sent as
	// a bearer token (api_key_file; placement remote only).
	APIKeyFile string
	// ResolveInterval is how often the host names of the endpoints are
	// resolved again (resolve_interval; placement remote only): each
	// address a name resolves to is one replica.
	ResolveInterval time.Duration
}

// Worker configures the worker processes of a stage with placement
// process: its YAML keys sit in the stage's deploy entry.
type Worker struct {
	// StartTimeout bounds the wait for a new worker to listen
	// (start_timeout).
	StartTimeout time.Duration
	// StopTimeout bounds the wait for a worker to exit when it is asked to
	// stop, before it is killed (stop_timeout).
	StopTimeout time.Duration
}

// Defaults.
const (
	DefaultMaxInflight      = 64
	DefaultStreamBuffer     = 8
	DefaultMaxAudioSeconds  = 600
	DefaultMaxMigrations    = 3
	DefaultAbortTimeout     = 10 * time.Second
	DefaultReplicas         = 1
	DefaultStageMaxQueue    = 64
	DefaultStageMaxInflight = 2
	// DefaultMaxBatch and DefaultMaxBatchDelay are a batching stage's
	// (see Batch): no wait, so that a lone request never waits for
	// company, and a batch holds what queued while the calls before it
	// ran (on a CPU, a compute-bound model gains nothing by waiting).
	DefaultMaxBatch      = 8
	DefaultMaxBatchDelay = 0

	DefaultWarmTimeout     = 2 * time.Minute
	DefaultHealthInterval  = 2 * time.Second
	DefaultHealthFailures  = 3
	DefaultResolveInterval = 10 * time.Second
	DefaultStartTimeout    = time.Minute
	DefaultStopTimeout     = 10 * time.Second
)

// NumStages returns the number of declared stages (the aligner's id).
func (p *Pipeline) NumStages() int { return len(p.Stages) }

// StageName returns the name of stage id, the aligner included.
func (c *Config) StageName(id int) string {
	if id >= 0 && id < len(c.Pipeline.Stages) {
		return c.Pipeline.Stages[id].Name
	}
	if c.Pipeline.Aligner != nil && id == len(c.Pipeline.Stages) {
		return c.Pipeline.Aligner.Name
	}
	return ""
}

// CheckServable refuses a stage that a headless stage server cannot serve:
// one the route skips, or no stage at all.
func (c *Config) CheckServable(id int) error {
	if c.Route.OnRoute(id) {
		return nil
	}
	return fmt.Errorf("stage %d is not on the route of pipeline %s (%s): a stage server runs a route stage", id, c.Pipeline.Name, c.Route)
}

// StageSpec returns what an engine driver needs to build a replica of stage
// id (the aligner included).
func (c *Config) StageSpec(id, replica int) (engineName string, spec engine.Spec) {
	d := c.Deploy.Stages[id]
	spec = engine.Spec{StageID: id, Options: d.Options, Replica: replica, Timeout: d.Link.Timeout, WarmTimeout: d.Link.WarmTimeout}
	if id < len(c.Pipeline.Stages) {
		s := c.Pipeline.Stages[id]
		spec.Name, spec.Input, spec.Output = s.Name, s.Input, s.Output
		return s.Engine, spec
	}
	a := c.Pipeline.Aligner
	spec.Name, spec.Input, spec.Output = a.Name, engine.KindAudio, engine.KindTimestamps
	return a.Engine, spec
}

// DefaultVoiceAliases maps the voice names that clients of other servers
// send to the built-in talker's voices, so that those clients work
// unchanged: OpenAI's (the women's voices to slt, the men's to rms, the
// storytellers' to awb), and the speakers of Qwen3-TTS's CustomVoice
// models, which vLLM-Omni's examples send (Vivian by default; its women
// to slt, its men to rms, Uncle_Fu, the seasoned one, to awb).
var DefaultVoiceAliases = map[string]string{
	"alloy": "slt", "coral": "slt", "nova": "slt", "sage": "slt", "shimmer": "slt", "marin": "slt",
	"echo": "rms", "onyx": "rms", "ash": "rms", "cedar": "rms",
	"fable": "awb", "ballad": "awb", "verse": "awb",
	"vivian": "slt", "serena": "slt", "ono_anna": "slt", "sohee": "slt",
	"ryan": "rms", "aiden": "rms", "dylan": "rms", "eric": "rms",
	"uncle_fu": "awb",
}
