// Package worker is the engine of a stage with placement process: each
// replica runs the stage's engine in a child process of its own, so a crash
// in that engine (a C library's exit, a segfault) takes down that replica
// only.
//
// # The worker process
//
// New starts
//
//	EXE serve --worker --stage N --config SOURCE --addr 127.0.0.1:0
//
// where EXE is this program and SOURCE is where the pipeline came from (a
// file or builtin:NAME). The worker builds one in-process replica of stage
// N, listens, and prints on its stdout a line with its address and
// pipeline digest (Announce); the parent refuses a worker whose digest
// differs from its own. Each worker gets a fresh random payload key in the
// environment (OMNISTAGE_PAYLOAD_KEY, never on the command line), so only
// its parent can hand it payloads. The worker's stderr, and any other
// output on its stdout, go to the stderr option a line at a time, prefixed
// with the replica's id. The worker runs in a process group of its own, so
// a Ctrl-C at the terminal reaches the parent only, which then stops its
// workers in order.
//
// The replica then talks to the worker as to a headless stage server,
// through the remote engine (package remote): Warm waits for the worker's
// /ready and Process makes one /v1/run call per request. So, like a remote
// stage, a process stage does not stream: its output leaves once it has run
// on its whole input.
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
// orchestrator).
//
// # Stopping
//
// Close closes the worker's stdin and sends it SIGTERM; a worker that has
// not exited after the stop_timeout option is killed. A worker also stops
// when its stdin reaches end of file, which is what happens when the
// parent dies, however it dies: no worker outlives its parent.
package worker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/remote"
	"github.com/omnistage/omnistage/internal/payload"
)

// Name is the engine's name: the runtime uses it for stages with placement
// process; configurations name the stage's own engine.
const Name = "worker"

// PayloadKeyEnv is the environment variable in which a worker process gets
// its payload key; omnistage serve reads the key from it.
const PayloadKeyEnv = "OMNISTAGE_PAYLOAD_KEY"

// APIKeyEnv is the environment variable in which a worker process gets the
// bearer token its parent calls it with.
const APIKeyEnv = "OMNISTAGE_WORKER_API_KEY"

// Register adds the worker engine to r.
func Register(r *engine.Registry) {
	r.Register(Name, engine.Driver{New: func(spec engine.Spec) (engine.Engine, error) { return New(spec) }})
}

// Engine is one replica: one worker process.
type Engine struct {
	set     *settings
	id      string // the replica's id, "vocoder/0"
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	console *console
	remote  *remote.Engine

	wg      sync.WaitGroup
	exited  chan struct{} // closed once the process has exited and its output is flushed
	exitErr error         // cmd.Wait's result, written before exited closes
	alive   context.Context
	died    context.CancelFunc

	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error // written before lost closes

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var (
	_ engine.Engine  = (*Engine)(nil)
	_ engine.Watcher = (*Engine)(nil)
)

// exitWait is how long Process waits, after a call broke off, for the
// worker's exit, so that the error says how it ended.
const exitWait = 2 * time.Second

// New starts a worker process for one replica of spec's stage and waits
// until it listens; see the package documentation.
func New(spec engine.Spec) (*Engine, error) {
	set, err := parseOptions(spec.Options)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	// Fresh keys per worker: only this process can sign payloads for it or
	// call it at all, though it listens on a loopback port.
	var keys [64]byte
	if _, err := rand.Read(keys[:]); err != nil {
		return nil, fmt.Errorf("worker: keys: %w", err)
	}
	hexKey, apiKey := hex.EncodeToString(keys[:32]), hex.EncodeToString(keys[32:])

	e := &Engine{
		set: set, id: fmt.Sprintf("%s/%d", spec.Name, spec.Replica),
		exited: make(chan struct{}), lost: make(chan struct{}), closing: make(chan struct{}),
	}
	e.alive, e.died = context.WithCancel(context.Background())
	e.cmd = exec.Command(set.exe, "serve", "--worker", "--stage", strconv.Itoa(spec.StageID), "--config", set.cfg.Source, "--addr", "127.0.0.1:0")
	// A later entry wins over one inherited with the same name.
	e.cmd.Env = append(os.Environ(), PayloadKeyEnv+"="+hexKey, APIKeyEnv+"="+apiKey)
	e.cmd.SysProcAttr = sysProcAttr()
	// A grandchild holding the worker's stdout or stderr must not keep
	// Wait from reporting the worker's exit.
	e.cmd.WaitDelay = time.Second
	e.console = &console{w: set.stderr, prefix: "worker " + e.id + ": "}
	// The worker announces its address on stdout. Other output there
	// (a C library's printf) goes with its stderr.
	announced := make(chan string, 1)
	waiting := true // only the goroutine copying stdout uses it
	stdout := &lineWriter{onLine: func(b []byte) {
		if waiting && bytes.HasPrefix(b, []byte(announcePrefix)) {
			waiting = false
			announced <- string(b)
			return
		}
		e.console.line(b)
	}}
	stderr := &lineWriter{onLine: func(b []byte) { e.console.line(b) }}
	e.cmd.Stdout, e.cmd.Stderr = stdout, stderr
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("worker: start %s: %w", set.exe, err)
	}
	e.console.setPrefix(fmt.Sprintf("worker %s (pid %d): ", e.id, e.Pid()))
	e.wg.Add(1)
	go e.wait(stdout, stderr)

	addr, err := e.awaitAddress(announced)
	if err == nil {
		e.remote, err = remote.New(engine.Spec{
			StageID: spec.StageID, Name: spec.Name, Input: spec.Input, Output: spec.Output, Replica: spec.Replica,
			Options: remoteOptions(spec.Options, addr, payload.NewCodec([]byte(hexKey)), apiKey),
		})
	}
	if err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("worker: %w", err)
	}
	e.wg.Add(1)
	go e.monitor()
	return e, nil
}

// awaitAddress waits for the worker's announcement and returns the address
// it listens on.
func (e *Engine) awaitAddress(announced <-chan string) (string, error) {
	t := time.NewTimer(e.set.startTimeout)
	defer t.Stop()
	select {
	case line := <-announced:
		addr, digest, err := parseAnnounce(line)
		if err != nil {
			return "", err
		}
		if digest != e.set.cfg.Digest() {
			return "", fmt.Errorf("the worker loaded %s, but its pipeline is not the one this process serves: has the file changed since it was loaded?", e.set.cfg.Source)
		}
		return addr, nil
	case <-e.exited:
		return "", fmt.Errorf("process %d exited while starting (%s)%s", e.Pid(), e.state(), e.console.last())
	case <-t.C:
		return "", fmt.Errorf("process %d did not listen within %s%s", e.Pid(), e.set.startTimeout, e.console.last())
	}
}

// wait reaps the worker process.
func (e *Engine) wait(stdout, stderr *lineWriter) {
	defer e.wg.Done()
	e.exitErr = e.cmd.Wait()
	// Wait has waited for the goroutines copying the output.
	stdout.flush()
	stderr.flush()
	select {
	case <-e.closing:
	default:
		e.console.line([]byte("exited unexpectedly (" + e.state() + ")"))
	}
	close(e.exited)
	e.died()
}

// monitor loses the replica when the worker exits or the remote engine
// gives up on it.
func (e *Engine) monitor() {
	defer e.wg.Done()
	select {
	case <-e.exited:
		e.markLost(e.exitError())
	case <-e.remote.Lost():
		e.markLost(fmt.Errorf("worker process %d stopped answering: %w", e.Pid(), engine.ErrReplicaLost))
		// Nothing will be sent to it again: free what it holds.
		_ = e.cmd.Process.Kill()
	case <-e.closing:
	}
}

func (e *Engine) markLost(cause error) {
	e.lostOnce.Do(func() {
		e.lostErr = cause
		close(e.lost)
	})
}

// state says how the worker process ended; call it after exited closed.
func (e *Engine) state() string {
	if e.cmd.ProcessState != nil {
		return e.cmd.ProcessState.String()
	}
	return e.exitErr.Error()
}

// exitError is the error of a request whose worker has exited.
func (e *Engine) exitError() error {
	return fmt.Errorf("worker process %d exited (%s): %w", e.Pid(), e.state(), engine.ErrReplicaLost)
}

// Pid returns the worker's process id.
func (e *Engine) Pid() int { return e.cmd.Process.Pid }

// Endpoint returns the base URL the worker listens on.
func (e *Engine) Endpoint() string { return e.remote.Endpoint() }

// Exited returns a channel closed once the worker process has exited.
func (e *Engine) Exited() <-chan struct{} { return e.exited }

// ExitError returns, once Exited is closed, how the worker process ended:
// nil for a clean exit, else the error of exec.Cmd.Wait.
func (e *Engine) ExitError() error {
	<-e.exited
	return e.exitErr
}

// Lost implements engine.Watcher.
func (e *Engine) Lost() <-chan struct{} { return e.lost }

// LostErr implements engine.LostReasoner: how the worker was lost.
func (e *Engine) LostErr() error {
	<-e.lost
	return e.lostErr
}

// Warm waits until the worker has warmed its replica (its /ready answers)
// or has exited.
func (e *Engine) Warm(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.alive, cancel)
	defer stop()
	err := e.remote.Warm(wctx)
	select {
	case <-e.exited:
		return fmt.Errorf("worker: process %d exited while warming up (%s)%s", e.Pid(), e.state(), e.console.last())
	default:
	}
	return err
}

// Process implements engine.Engine: it runs the request's stage on the
// worker.
func (e *Engine) Process(ctx context.Context, job *engine.Job) error {
	select {
	case <-e.lost:
		return e.lostErr
	default:
	}
	err := e.remote.Process(ctx, job)
	if err == nil || !errors.Is(err, engine.ErrReplicaLost) {
		return err
	}
	// The call broke off: the worker has most likely died. Say how.
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-e.exited:
		return e.exitError()
	case <-t.C:
	case <-ctx.Done():
	}
	return fmt.Errorf("worker process %d: %w", e.Pid(), err)
}

// Close stops the worker: it closes the worker's stdin and sends it
// SIGTERM, waits for it to exit for at most the stop_timeout option, then
// kills it. It reports an error only when the worker had to be killed.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		close(e.closing)
		if e.remote != nil {
			_ = e.remote.Close()
		}
		e.closeErr = e.stop()
		e.wg.Wait()
	})
	return e.closeErr
}

func (e *Engine) stop() error {
	_ = e.stdin.Close()
	select {
	case <-e.exited:
		return nil
	default:
	}
	// Where SIGTERM is not supported (Windows), the closed stdin stops the
	// worker all the same.
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(e.set.stopTimeout)
	defer t.Stop()
	select {
	case <-e.exited:
		return nil
	case <-t.C:
	}
	_ = e.cmd.Process.Kill()
	<-e.exited
	return fmt.Errorf("worker: process %d of %s did not stop within %s; killed it", e.Pid(), e.id, e.set.stopTimeout)
}
