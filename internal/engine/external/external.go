// Package external is the engine of a stage whose replicas are programs
// speaking the stage protocol (docs/stage-protocol.md): any program, in any
// language, runs as a stage. Each replica is one child process, started
// from the stage's command; the runtime's side of its connection is here,
// the framing and messages are package stageproto's.
//
// # Options
//
// A stage with engine external takes, in its deploy entry's options:
// command (the program and its arguments, a list: never a shell string),
// cwd (the directory it runs in), env (variables it gets, beyond PATH) and
// config (an object handed to the program when it warms up) and
// detailed_errors (Options.DetailedErrors). Its deploy entry's timeout
// (default DefaultTimeout) and warm_timeout bound a job's silence and the
// program's start (engine.Spec.Timeout, WarmTimeout).
//
// # A replica
//
// New starts the program; Warm reads its hello, checks that it takes and
// makes the stage's kinds, sends warm and waits for ready. Process runs one
// job: it sends the job's input as it arrives and relays its output as it
// comes back, each direction against the other side's credit, so that a
// slow reader slows the program and nothing buffers without bound. A
// cancelled job is cancelled in the program, which must acknowledge it.
//
// # Batches
//
// A program whose hello has max_batch takes batches instead of jobs: the
// engine is an engine.Batcher, each input chunk of a request one unit of
// work (one job of one input chunk, its output taken when it ends), and
// the runtime gathers the units of concurrent requests into batch
// messages of up to the stage's max_batch (and the program's) as it does
// for any batching engine. A batch takes one of the program's max_jobs
// slots. With a program that does not batch, the engine is a Batcher all
// the same (whether a program batches is known only once it has said
// hello), but Process hands nothing to the runtime's batches: the stage's
// max_batch and max_batch_delay change nothing.
//
// # Losing a replica
//
// The replica is lost (engine.Loss) when the program exits, closes its
// standard output, writes a malformed message or leaves a cancel
// unanswered: the requests bound to it fail with an error wrapping
// engine.ErrReplicaLost that names the replica, the kind of loss and how
// the program ended. The program's command, pid and last lines of
// standard error go with it only to Config.Stderr (unless the stage's
// detailed_errors is set), which gets the program's standard error a line
// at a time, prefixed with the replica, within subprocess.LogRate. The
// runtime restarts the replica in its slot (package pool).
package external

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// Name is the engine's name in a pipeline.
const Name = "external"

// DeployKeys are the deploy keys the engine takes whatever the stage's
// placement (engine.Driver.DeployKeys): timeout and warm_timeout bound the
// stage's programs, which run outside the runtime's process even with
// placement inproc; max_batch and max_batch_delay shape the batches of a
// program that takes them. A stage takes the batch keys whatever its
// program: they are set before any program says what it takes, and
// change nothing for one that does not batch (nor does the default,
// max_batch 8, which every stage has).
var DeployKeys = []string{"timeout", "warm_timeout", "max_batch", "max_batch_delay"}

// Options are a stage's deploy options.
type Options struct {
	Command []string          `json:"command"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	Config  json.RawMessage   `json:"config"`
	// DetailedErrors gives the error of a lost replica, which API clients
	// read, what the server's log gets: the program's command, its pid
	// and its last lines of standard error (for development; without it,
	// the error says the replica and the kind of loss).
	DetailedErrors bool `json:"detailed_errors"`
}

// Config configures the engine's replicas.
type Config struct {
	// Stderr gets the programs' standard error, a line at a time, each
	// prefixed with the replica; nil means os.Stderr.
	Stderr io.Writer
	// CancelTimeout bounds the wait for a program's answer to cancel,
	// past which its replica is lost; zero means DefaultCancelTimeout.
	CancelTimeout time.Duration
}

// Defaults of the stage's bounds.
const (
	// DefaultWarmTimeout bounds a program's start when the stage has no
	// warm_timeout.
	DefaultWarmTimeout = 2 * time.Minute
	// DefaultCancelTimeout bounds the wait for a program's answer to
	// cancel.
	DefaultCancelTimeout = 5 * time.Second
	// CheckTimeout bounds the wait for a program's answer to check.
	CheckTimeout = 5 * time.Second
	// StopTimeout bounds the wait for a program to exit when it is asked
	// to, before it is killed.
	StopTimeout = 10 * time.Second
	// DefaultTimeout bounds a job's silence when the stage has no
	// timeout: a program that never answers would otherwise hold its
	// requests, and one of its max_jobs, until each client gave up.
	DefaultTimeout = time.Minute
)

// Register adds the engine to r.
func Register(r *engine.Registry, cfg Config) {
	r.Register(Name, engine.Driver{
		Check: func(spec engine.Spec) error {
			_, err := decodeOptions(spec)
			return err
		},
		New:        func(spec engine.Spec) (engine.Engine, error) { return New(spec, cfg) },
		DeployKeys: DeployKeys,
	})
}

// decodeOptions decodes and checks the options of spec's stage.
func decodeOptions(spec engine.Spec) (*Options, error) {
	if _, ok := spec.Options["command"].(string); ok {
		return nil, errors.New(Name + ": options.command must be a list, the program and its arguments (never a shell string): command: [\"python3\", \"stage.py\"]")
	}
	var o Options
	if err := spec.Options.Decode(&o); err != nil {
		return nil, fmt.Errorf("%s: options: %w", Name, err)
	}
	switch {
	case len(o.Command) == 0:
		return nil, errors.New(Name + ": options.command is missing: give the program to run and its arguments, as a list")
	case o.Command[0] == "":
		return nil, errors.New(Name + ": options.command[0] is empty: name the program to run")
	}
	if len(o.Config) > 0 {
		var v any
		if err := json.Unmarshal(o.Config, &v); err != nil {
			return nil, fmt.Errorf("%s: options.config: %w", Name, err)
		}
		if _, ok := v.(map[string]any); !ok && v != nil {
			return nil, errors.New(Name + ": options.config must be a mapping")
		}
	}
	return &o, nil
}
