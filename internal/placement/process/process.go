// Package process is the placement of a stage with placement process: each
// replica runs the stage's engine in a child process of its own, so a crash
// in that engine (a C library's exit, a segfault) takes down that replica
// only.
//
// # The worker process
//
// New starts the worker (see protocol.go for both sides of the protocol):
// this program again, as omnistage serve --worker for the replica's stage.
// The worker builds one in-process replica of the stage, listens on a
// loopback port, and announces its address and pipeline digest; the parent
// refuses a worker whose digest differs from its own. Each worker gets
// fresh random keys in the environment, so only its parent can hand it
// payloads, or call it at all. The worker's stderr, and any other output on
// its stdout, go to Config.Stderr a line at a time, prefixed with the
// replica's id. The worker runs in a process group of its own, so a Ctrl-C
// at the terminal reaches the parent only, which then stops its workers in
// order.
//
// The replica then talks to the worker as to a headless stage server,
// through the remote placement (package remote): Warm waits for the
// worker's /ready, and Process streams each request's input to the worker
// and its output back, as they are produced (package hop).
//
// # Losing a replica
//
// Lost closes when the worker process exits, or when the remote engine
// gives up on it (its health checks fail, a call's connection drops); a
// worker that stops answering while still running is killed. The runtime
// then fails the requests bound to the replica with an error naming the
// stage and the replica, and sends new requests to the other replicas;
// Process returns errors wrapping engine.ErrReplicaLost that say how the
// process ended ("exit status 2" after a crash in C code, "signal: killed"
// after the OOM killer), and the worker's output ends with a line saying
// the same. The engine does not restart a lost worker: the runtime builds
// a new replica, and so a new worker process, in its place (see package
// stage).
//
// # Stopping
//
// Close closes the worker's stdin and sends it SIGTERM; a worker that has
// not exited after the stop timeout is killed. A worker also stops when
// its stdin reaches end of file, which is what happens when the parent
// dies, however it dies: no worker outlives its parent.
package process

import (
	"io"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/pool"
)

// Placement builds the replicas of a pipeline's stages with placement
// process, one worker process each. Its zero fields have defaults.
type Placement struct {
	// Pipeline is the configuration this process serves; the workers load
	// it again from its Source.
	Pipeline *pipeline.Config
	// Executable is the program started as a worker; "" means this
	// process's own executable.
	Executable string
	// Flags are added to each worker's command line (serve's flags, such
	// as --turns=false).
	Flags []string
	// Stderr gets the workers' output, each line prefixed with the
	// replica; nil means os.Stderr.
	Stderr io.Writer
	// TracerProvider, when set, traces the calls to the workers.
	TracerProvider trace.TracerProvider
}

// Supervise builds cfg.Replicas workers of the stage spec describes and
// returns their supervisor, which builds a new worker in the slot of one
// that is lost (it implements the orchestrator's Placement).
func (p *Placement) Supervise(spec engine.Spec, d *pipeline.DeployStage, cfg pool.Config) (*pool.Supervisor, error) {
	return pool.Supervise(cfg, func(i int) (engine.Engine, error) {
		spec := spec
		spec.Replica = i
		return p.New(spec, d)
	})
}

// New starts the worker of one replica of the stage spec describes and d
// deploys (see Engine).
func (p *Placement) New(spec engine.Spec, d *pipeline.DeployStage) (*Engine, error) {
	return New(Config{Stage: spec, Pipeline: p.Pipeline, Executable: p.Executable, Flags: p.Flags, Stderr: p.Stderr,
		Worker: d.Worker, Link: d.Link, TracerProvider: p.TracerProvider})
}
