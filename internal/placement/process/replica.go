package process

// One replica: a worker process, and the proxy engine that calls it.

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

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/subprocess"
)

// Config is one replica's configuration.
type Config struct {
	// Stage is the replica's stage (id, name, kinds) and index.
	Stage engine.Spec
	// Pipeline is the configuration this process serves. The worker loads
	// it again from its Source (a file or builtin:NAME).
	Pipeline *pipeline.Config
	// Executable is the program started as the worker; "" means this
	// process's own executable.
	Executable string
	// Flags are added to the worker's command line (serve's flags, such
	// as --turns=false).
	Flags []string
	// Stderr gets the worker's output, each line prefixed with the
	// replica's id; nil means os.Stderr.
	Stderr io.Writer
	// Worker bounds the worker's start and stop (the deploy entry's
	// start_timeout and stop_timeout); zero fields take the defaults.
	Worker pipeline.Worker
	// Link are the calls' settings (the deploy entry's timeout,
	// warm_timeout, health_interval and health_failures).
	Link pipeline.Link
	// TracerProvider, when set, traces the calls to the worker (its own
	// spans are its own: it sets up tracing from the OTEL_* environment
	// it inherits).
	TracerProvider trace.TracerProvider
}

// Engine is one replica: one worker process.
type Engine struct {
	cfg     Config
	id      string // the replica's id, "vocoder/0"
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	console *subprocess.Console
	remote  *remote.Engine
	url     string // where the worker listens: http://ADDR

	wg      sync.WaitGroup
	exited  chan struct{} // closed once the process has exited and its output is flushed
	exitErr error         // cmd.Wait's result, written before exited closes
	alive   context.Context
	died    context.CancelFunc

	engine.Loss

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var (
	_ engine.Engine       = (*Engine)(nil)
	_ engine.Watcher      = (*Engine)(nil)
	_ engine.LostReasoner = (*Engine)(nil)
)

// exitWait is how long Process waits, after a call broke off, for the
// worker's exit, so that the error says how it ended.
const exitWait = 2 * time.Second

// New starts a worker process for one replica of cfg's stage and waits
// until it listens; see the package documentation.
func New(cfg Config) (*Engine, error) {
	switch {
	case cfg.Pipeline == nil || cfg.Pipeline.Route == nil:
		return nil, errors.New("worker: no pipeline with a resolved route")
	case cfg.Pipeline.Source == "":
		return nil, errors.New("worker: the pipeline was not loaded from a file or a built-in, so a worker process cannot load it")
	}
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("worker: this process's executable is unknown: %w", err)
		}
		cfg.Executable = exe
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Worker.StartTimeout <= 0 {
		cfg.Worker.StartTimeout = pipeline.DefaultStartTimeout
	}
	if cfg.Worker.StopTimeout <= 0 {
		cfg.Worker.StopTimeout = pipeline.DefaultStopTimeout
	}
	// Fresh keys per worker: only this process can sign payloads for it or
	// call it at all, though it listens on a loopback port.
	var keys [64]byte
	if _, err := rand.Read(keys[:]); err != nil {
		return nil, fmt.Errorf("worker: keys: %w", err)
	}
	hexKey, apiKey := hex.EncodeToString(keys[:32]), hex.EncodeToString(keys[32:])

	spec := cfg.Stage
	e := &Engine{
		cfg: cfg, id: fmt.Sprintf("%s/%d", spec.Name, spec.Replica),
		exited: make(chan struct{}), closing: make(chan struct{}),
	}
	e.alive, e.died = context.WithCancel(context.Background())
	args := []string{"serve", "--worker", "--stage", strconv.Itoa(spec.StageID), "--config", cfg.Pipeline.Source, "--pipeline", cfg.Pipeline.Pipeline.Name, "--addr", "127.0.0.1:0"}
	e.cmd = exec.Command(cfg.Executable, append(args, cfg.Flags...)...)
	// A later entry wins over one inherited with the same name.
	e.cmd.Env = append(os.Environ(), keyfile.PayloadKeyEnv+"="+hexKey, APIKeyEnv+"="+apiKey)
	e.cmd.SysProcAttr = subprocess.SysProcAttr()
	// A grandchild holding the worker's stdout or stderr must not keep
	// Wait from reporting the worker's exit.
	e.cmd.WaitDelay = time.Second
	e.console = subprocess.NewConsole(cfg.Stderr, "worker "+e.id+": ")
	// A worker that floods its output (an engine's library printing per
	// sample, say) must not flood the server's log.
	e.console.Limit("output", subprocess.LogRate, subprocess.LogBurst)
	// The worker announces its address on stdout. Other output there
	// (a C library's printf) goes with its stderr.
	announced := make(chan string, 1)
	waiting := true // only the goroutine copying stdout uses it
	stdout := &subprocess.LineWriter{OnLine: func(b []byte) {
		if waiting && bytes.HasPrefix(b, []byte(announcePrefix)) {
			waiting = false
			announced <- string(b)
			return
		}
		e.console.Line(b)
	}}
	stderr := &subprocess.LineWriter{OnLine: func(b []byte) { e.console.Line(b) }}
	e.cmd.Stdout, e.cmd.Stderr = stdout, stderr
	var err error
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("worker: start %s: %w", cfg.Executable, err)
	}
	e.console.SetPrefix(fmt.Sprintf("worker %s (pid %d): ", e.id, e.Pid()))
	e.wg.Add(1)
	go e.wait(stdout, stderr)

	addr, err := e.awaitAddress(announced)
	if err == nil {
		e.console.Line([]byte("listening on " + addr))
		e.url = "http://" + addr
		e.remote, err = remote.New(remote.Config{
			Stage: spec, Pipeline: cfg.Pipeline, Endpoint: e.url,
			Client: &hop.Client{HTTP: hop.NewHTTPClient(), APIKey: apiKey, TracerProvider: cfg.TracerProvider},
			Codec:  payload.NewCodec([]byte(hexKey)), Link: cfg.Link,
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
	t := time.NewTimer(e.cfg.Worker.StartTimeout)
	defer t.Stop()
	select {
	case line := <-announced:
		addr, digest, err := parseAnnounce(line)
		if err != nil {
			return "", err
		}
		if digest != e.cfg.Pipeline.Digest() {
			return "", fmt.Errorf("the worker loaded %s, but its pipeline is not the one this process serves: has the file changed since it was loaded?", e.cfg.Pipeline.Source)
		}
		return addr, nil
	case <-e.exited:
		return "", fmt.Errorf("process %d exited while starting (%s)%s", e.Pid(), e.state(), e.console.Last())
	case <-t.C:
		return "", fmt.Errorf("process %d did not listen within %s%s", e.Pid(), e.cfg.Worker.StartTimeout, e.console.Last())
	}
}

// wait reaps the worker process.
func (e *Engine) wait(stdout, stderr *subprocess.LineWriter) {
	defer e.wg.Done()
	e.exitErr = e.cmd.Wait()
	// Wait has waited for the goroutines copying the output.
	stdout.Flush()
	stderr.Flush()
	select {
	case <-e.closing:
	default:
		e.console.Line([]byte("exited unexpectedly (" + e.state() + ")"))
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
		e.Mark(e.exitError())
	case <-e.remote.Lost():
		// A call broke off, or the health checks failed: the process has
		// most likely died; if so, say how.
		t := time.NewTimer(exitWait)
		defer t.Stop()
		select {
		case <-e.exited:
			e.Mark(e.exitError())
		case <-t.C:
			e.Mark(fmt.Errorf("worker process %d stopped answering: %w", e.Pid(), engine.ErrReplicaLost))
			// Nothing will be sent to it again: free what it holds.
			_ = e.cmd.Process.Kill()
		case <-e.closing:
		}
	case <-e.closing:
	}
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
		return fmt.Errorf("worker: process %d exited while warming up (%s)%s", e.Pid(), e.state(), e.console.Last())
	default:
	}
	return err
}

// Process implements engine.Engine: it runs the request's stage on the
// worker.
func (e *Engine) Process(ctx context.Context, job *engine.Job) error {
	if err := e.Loss.Err(); err != nil {
		return err
	}
	err := e.remote.Process(ctx, job)
	switch {
	case err == nil || !errors.Is(err, engine.ErrReplicaLost):
		return err
	case errors.Is(err, engine.ErrUnsent):
		// The worker refused the call: the runtime moves the request.
		return fmt.Errorf("worker process %d: %w", e.Pid(), err)
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
// SIGTERM, waits for it to exit for at most the stop timeout, then
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
	t := time.NewTimer(e.cfg.Worker.StopTimeout)
	defer t.Stop()
	select {
	case <-e.exited:
		return nil
	case <-t.C:
	}
	_ = e.cmd.Process.Kill()
	<-e.exited
	return fmt.Errorf("worker: process %d of %s did not stop within %s; killed it", e.Pid(), e.id, e.cfg.Worker.StopTimeout)
}
