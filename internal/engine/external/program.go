package external

// One replica's program: starting it, reading its messages, and its end.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
	"github.com/omnistage/omnistage/internal/subprocess"
)

// Engine is one replica: one running program.
type Engine struct {
	spec    engine.Spec
	cfg     Config
	opts    *Options
	id      string // the replica's id, "synth/1"
	child   *subprocess.Child
	w       *stageproto.Writer
	console *subprocess.Console

	hello   chan *stageproto.Header // the program's hello, once
	helloed bool                    // the reader has seen it; the reader's own
	started chan error              // ready (nil) or the program's refusal
	info    *stageproto.Header      // the hello, once Warm has read it
	params  []string                // the params hello names, sorted; nil when it names none
	slots   chan struct{}           // one per job the program may run at once

	mu     sync.Mutex
	jobs   map[int64]*job
	checks map[int64]chan *stageproto.Header
	nextID atomic.Int64 // numbers jobs and checks

	dropped atomic.Int64 // messages for jobs that had ended, dropped

	engine.Loss
	losing   atomic.Bool // set by the first lose
	detail   error       // the loss with its detail; written before Mark
	wg       sync.WaitGroup
	closing  chan struct{}
	once     sync.Once
	closeErr error
}

var (
	_ engine.Engine        = (*Engine)(nil)
	_ engine.Watcher       = (*Engine)(nil)
	_ engine.LostReasoner  = (*Engine)(nil)
	_ engine.ParamsChecker = (*Engine)(nil)
	_ engine.Voicer        = (*Engine)(nil)
)

// exitWait is how long a lost replica's error waits for the program's exit,
// to say how it ended.
const exitWait = time.Second

// New starts the program of one replica of spec's stage; Warm then waits
// for it to be ready.
func New(spec engine.Spec, cfg Config) (*Engine, error) {
	opts, err := decodeOptions(spec)
	if err != nil {
		return nil, err
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = DefaultCancelTimeout
	}
	e := &Engine{
		spec: spec, cfg: cfg, opts: opts, id: fmt.Sprintf("%s/%d", spec.Name, spec.Replica),
		hello: make(chan *stageproto.Header, 1), started: make(chan error, 1),
		jobs: map[int64]*job{}, checks: map[int64]chan *stageproto.Header{},
		closing: make(chan struct{}),
	}
	if e.spec.Timeout <= 0 {
		e.spec.Timeout = DefaultTimeout
	}
	e.console = subprocess.NewConsole(cfg.Stderr, "stage "+e.id+": ")
	e.console.Limit("standard error", subprocess.LogRate, subprocess.LogBurst)
	e.child, err = subprocess.Start(subprocess.Program{Argv: opts.Command, Dir: opts.Cwd, Env: opts.Env,
		Stderr: &subprocess.LineWriter{OnLine: e.console.Line}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	e.console.SetPrefix(fmt.Sprintf("stage %s (pid %d): ", e.id, e.child.Pid()))
	e.w = stageproto.NewWriter(e.child.Stdin)
	e.wg.Add(2)
	go e.wait()
	go func() {
		defer e.child.Stdout.Close()
		e.read(stageproto.NewReader(e.child.Stdout))
	}()
	return e, nil
}

// wait reaps the program.
func (e *Engine) wait() {
	defer e.wg.Done()
	e.child.Wait()
	e.console.Flush()
	e.lose(lossExited, nil)
}

// The kinds of a replica's loss: what its error tells API clients.
const (
	lossExited    = "the program exited"
	lossClosed    = "the program closed its standard output"
	lossCut       = "the program's standard output ended inside a message"
	lossMalformed = "the program wrote a malformed message"
	lossBreach    = "the program broke the protocol"
	lossFatal     = "the program failed"
	lossWrite     = "writing to the program failed"
	lossCancel    = "the program did not answer a cancel"
)

// lose loses the replica: the program is stopped, and every job still
// running fails with the loss's kind, one of the loss constants, and how
// the program ended. What the server's log gets (and, with the stage's
// detailed_errors, the error too) also has detail, the program's command,
// its pid and its last output.
func (e *Engine) lose(kind string, detail error) {
	if !e.losing.CompareAndSwap(false, true) {
		// The first cause is the one to report: wait for it, so that the
		// caller finds the replica lost.
		<-e.Lost()
		return
	}
	select {
	case <-e.closing:
		// Close stops the program on purpose: not a loss to report.
		e.Mark(fmt.Errorf("%s: replica %s was closed: %w", Name, e.id, engine.ErrReplicaLost))
		return
	default:
	}
	_ = e.child.Kill()
	e.child.ExitedWithin(exitWait)
	how := e.child.How()
	cause := kind
	if detail != nil {
		cause += ": " + detail.Error()
	}
	e.detail = fmt.Errorf("%s: program %q of replica %s (pid %d): %s (%s)%s%s: %w",
		Name, e.opts.Command, e.id, e.child.Pid(), cause, how, e.envHint(), e.console.Last(), engine.ErrReplicaLost)
	e.console.Note("lost: " + e.detail.Error())
	if e.opts.DetailedErrors {
		e.Mark(e.detail)
		return
	}
	e.Mark(fmt.Errorf("%s: replica %s: %s (%s): %w", Name, e.id, kind, how, engine.ErrReplicaLost))
}

// envHint is what to add to the error of a program that died on an import:
// "; the program's environment is clean ...", or "".
func (e *Engine) envHint() string {
	if !subprocess.MissingModule(e.console.Tail()) {
		return ""
	}
	return "; " + subprocess.CleanEnvHint("options.env of the stage's deploy entry")
}

// read reads the program's messages until its output ends, handing each to
// the job or check it belongs to.
func (e *Engine) read(r *stageproto.Reader) {
	defer e.wg.Done()
	for {
		var h stageproto.Header
		data, err := r.Read(&h)
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				e.lose(lossClosed, nil)
			case errors.Is(err, os.ErrDeadlineExceeded):
				// The program exited; what holds its output is not its own
				// (subprocess.OutputDelay).
				e.lose(lossExited, nil)
			case errors.Is(err, io.ErrUnexpectedEOF):
				e.lose(lossCut, err)
			default:
				e.lose(lossMalformed, err)
			}
			return
		}
		if err := e.dispatch(&h, data); err != nil {
			var fe *fatalError
			if errors.As(err, &fe) {
				e.lose(lossFatal, errors.New(fe.msg))
			} else {
				e.lose(lossBreach, err)
			}
			return
		}
		// Let the goroutine the message woke (the job's relay or pump) run
		// on this thread before the reader polls the pipe again: the raw
		// read that polls it (stageproto's pipe_linux.go) keeps the thread's
		// processor busy, so the scheduler would wake a second thread for
		// that goroutine, which sleeps 3 µs before it takes it: a context
		// switch or two more per chunk on a loaded machine.
		runtime.Gosched()
	}
}

// dispatch handles one message of the program; an error is a breach of
// the protocol, which loses the replica.
func (e *Engine) dispatch(h *stageproto.Header, data []byte) error {
	if h.Type != stageproto.TypeHello && !e.helloed {
		return fmt.Errorf("the program's first message is %s; it must be hello", h.Type)
	}
	switch h.Type {
	case stageproto.TypeHello:
		if e.helloed {
			return errors.New("the program said hello twice")
		}
		e.helloed = true
		e.hello <- h
		return nil
	case stageproto.TypeReady:
		select {
		case e.started <- nil:
		default:
		}
		return nil
	case stageproto.TypeChecked:
		e.mu.Lock()
		ch := e.checks[h.ID]
		delete(e.checks, h.ID)
		e.mu.Unlock()
		if ch != nil {
			ch <- h
		}
		return nil
	case stageproto.TypeError:
		if h.Job == 0 {
			err := &fatalError{msg: h.Message}
			select {
			case e.started <- err: // refused to start
				return nil
			default:
				return err
			}
		}
	case stageproto.TypeOutput, stageproto.TypeDone, stageproto.TypeCancelled, stageproto.TypeCredit:
	default:
		return nil // a type a later protocol version may add
	}
	e.mu.Lock()
	j := e.jobs[h.Job]
	e.mu.Unlock()
	if j == nil {
		e.dropped.Add(1)
		return nil
	}
	return j.deliver(e, h, data)
}

// fatalError is a program's error message without a job: the program
// failed as a whole (or refused to start).
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return lossFatal + ": " + e.msg }

// Warm reads the program's hello, checks it against the stage, sends warm
// and waits for ready, for at most the stage's warm_timeout.
func (e *Engine) Warm(ctx context.Context) error {
	limit := e.spec.WarmTimeout
	if limit <= 0 {
		limit = DefaultWarmTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	fail := func(err error) error {
		// A program that failed to start is of no use: stop it now, so that
		// closing the replica does not wait for it.
		_ = e.child.Kill()
		return fmt.Errorf("%s: program %q: %w%s%s", Name, e.opts.Command, err, e.envHint(), e.console.Last())
	}
	wait := func(what string) error {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fail(fmt.Errorf("not %s within %s (warm_timeout)", what, limit))
			}
			return fail(ctx.Err())
		case <-e.Lost():
			// The loss's detail names the program, says how it ended and
			// holds its last output: start-up's errors are the
			// operator's, whatever the stage's detailed_errors.
			return e.lostDetail()
		}
	}
	select {
	case h := <-e.hello:
		if err := e.checkHello(h); err != nil {
			return fail(err)
		}
	case <-ctx.Done():
		return wait("said hello")
	case <-e.Lost():
		return wait("said hello")
	}
	config := e.opts.Config
	if len(config) == 0 {
		config = []byte("{}")
	}
	if err := e.w.Write(stageproto.Warm{Type: stageproto.TypeWarm, Config: config}, nil); err != nil {
		return fail(err)
	}
	select {
	case err := <-e.started:
		if err != nil {
			return fail(err)
		}
		return nil
	case <-ctx.Done():
		return wait("ready")
	case <-e.Lost():
		return wait("ready")
	}
}

// lostDetail is the detailed error of the replica's loss (lose), once it
// is lost; without one (it was closed), the loss's error.
func (e *Engine) lostDetail() error {
	if e.detail != nil {
		return e.detail
	}
	return e.Loss.Err()
}

// checkHello checks the program's hello against the stage, and keeps it.
func (e *Engine) checkHello(h *stageproto.Header) error {
	switch {
	case h.Protocol != stageproto.Version:
		return fmt.Errorf("the program speaks protocol version %d; this runtime speaks %d", h.Protocol, stageproto.Version)
	case h.Input != string(e.spec.Input) || h.Output != string(e.spec.Output):
		return fmt.Errorf("the program takes %q and makes %q, but stage %d (%s) takes %s and makes %s", h.Input, h.Output, e.spec.StageID, e.spec.Name, e.spec.Input, e.spec.Output)
	case h.MaxJobs < 0 || h.Window < 0 || h.MaxBatch < 0:
		return fmt.Errorf("the program's hello has max_jobs %d, window %d and max_batch %d: none may be negative", h.MaxJobs, h.Window, h.MaxBatch)
	}
	if h.MaxJobs == 0 {
		h.MaxJobs = stageproto.DefaultMaxJobs
	}
	if h.Window == 0 {
		h.Window = stageproto.DefaultWindow
	}
	params, err := paramNames(h.Params)
	if err != nil {
		return err
	}
	e.info, e.params = h, params
	e.slots = make(chan struct{}, h.MaxJobs)
	return nil
}

// Voices implements engine.Voicer: the voices the program's hello names.
func (e *Engine) Voices() []engine.Voice {
	if e.info == nil {
		return nil
	}
	return e.info.Voices
}

// Close stops the program: it asks it to shut down, closes its standard
// input, and kills it if it has not exited within StopTimeout. It reports
// an error only when the program had to be killed.
func (e *Engine) Close() error {
	e.once.Do(func() {
		close(e.closing)
		_ = e.w.Write(stageproto.Bare{Type: stageproto.TypeShutdown}, nil)
		_ = e.child.Stdin.Close()
		if _, ok := e.child.ExitedWithin(StopTimeout); !ok {
			_ = e.child.Terminate()
			if _, ok := e.child.ExitedWithin(time.Second); !ok {
				_ = e.child.Kill()
			}
			e.closeErr = fmt.Errorf("%s: program of %s did not exit within %s of shutdown; stopped it", Name, e.id, StopTimeout)
		}
		e.wg.Wait()
	})
	return e.closeErr
}
