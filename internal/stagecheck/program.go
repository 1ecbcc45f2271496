package stagecheck

// A run of the program driven by hand: the runtime's side of the protocol
// one message at a time, for the cases that must see the wire (the hello,
// credit, the program's exit).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/stageproto"
	"github.com/omnistage/omnistage/internal/subprocess"
)

// program is one run of the stage program, its standard input and output
// speaking the protocol with the check.
type program struct {
	child *subprocess.Child
	w     *stageproto.Writer
	jobs  int64 // the last job number used

	msgs    chan *message // the program's messages, as the reader reads them
	readErr error         // why reading ended; written before msgs closes
	over    bool          // next has seen msgs closed
	stop    chan struct{} // closed by kill: the reader stops handing on
	once    sync.Once
	wg      sync.WaitGroup
}

// message is one of the program's messages.
type message struct {
	h    stageproto.Header
	data []byte
}

// msgBuffer is how many of the program's messages the reader holds for
// the check: enough for all that a program keeping to its credit may send
// to the jobs of the concurrent case before the check reads on, so that
// its writes never wait on the check's while the check's wait on its.
const msgBuffer = 512

// exitWait is how long an ended program's report waits for its exit, to
// say how it ended.
const exitWait = time.Second

// withHint follows the report of a header that is not JSON with a hint:
// most are a library's print.
func withHint(msg string) string {
	if strings.Contains(msg, "is not a JSON object") && !strings.Contains(msg, "json: cannot unmarshal") {
		return msg + " (nothing but messages may go to standard output: print to standard error)"
	}
	return msg
}

var (
	// errWait is a wait for the program that timed out.
	errWait = errors.New("no answer")
	// errStopped ends the output of a program the check stopped.
	errStopped = errors.New("the check stopped the program")
)

// startProgram starts the program of opts as the runtime does (package
// external), with subprocess.Start; its standard error goes to stderr.
func startProgram(opts *Options, stderr *subprocess.LineWriter) (*program, error) {
	child, err := subprocess.Start(subprocess.Program{Argv: opts.Command, Dir: opts.Cwd, Env: opts.Env, Stderr: stderr})
	if err != nil {
		return nil, fmt.Errorf("it did not start: %w", err)
	}
	p := &program{child: child, w: stageproto.NewWriter(child.Stdin), msgs: make(chan *message, msgBuffer), stop: make(chan struct{})}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		child.Wait()
	}()
	go p.read(stageproto.NewReader(child.Stdout))
	return p, nil
}

// read reads the program's messages until its output ends or breaks.
func (p *program) read(r *stageproto.Reader) {
	defer p.wg.Done()
	defer close(p.msgs)
	defer p.child.Stdout.Close()
	for {
		m := &message{}
		data, err := r.Read(&m.h)
		select {
		case <-p.stop:
			err = errStopped
		default:
		}
		if err != nil {
			p.readErr = err
			return
		}
		m.data = data
		select {
		case p.msgs <- m:
		case <-p.stop:
			p.readErr = errStopped
			return
		}
	}
}

// next returns the program's next message, waiting at most d: errWait
// when none came, or why the program's output ended (ended).
func (p *program) next(ctx context.Context, d time.Duration) (*message, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m, ok := <-p.msgs:
		if !ok {
			p.over = true
			return nil, p.ended()
		}
		return m, nil
	case <-t.C:
		return nil, errWait
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ended says why the program's output ended: a malformed message, or the
// program's end (how it exited).
func (p *program) ended() error {
	var pe *stageproto.ProtocolError
	switch {
	case errors.As(p.readErr, &pe):
		return fmt.Errorf("it wrote a malformed message: %s", withHint(pe.Msg))
	case errors.Is(p.readErr, io.ErrUnexpectedEOF):
		return fmt.Errorf("its standard output ended inside a message (%v)", p.readErr)
	case p.readErr != nil && !errors.Is(p.readErr, io.EOF):
		return fmt.Errorf("reading its output: %v", p.readErr)
	}
	if st, ok := p.exitedWithin(exitWait); ok {
		return fmt.Errorf("it exited (%s)", st)
	}
	return errors.New("it closed its standard output and still runs")
}

// exitedWithin waits at most d for the program's exit, and returns how it
// ended.
func (p *program) exitedWithin(d time.Duration) (*os.ProcessState, bool) {
	return p.child.ExitedWithin(d)
}

// send writes a message to the program.
func (p *program) send(v any, data []byte) error {
	if err := p.w.Write(v, data); err != nil {
		if st, ok := p.exitedWithin(exitWait); ok {
			return fmt.Errorf("it exited (%s)", st)
		}
		return fmt.Errorf("writing to the program: %w", err)
	}
	return nil
}

// waitExit waits at most d for the program to exit, and returns how it
// ended. It drops the messages the program writes meanwhile, so that it
// never waits on its output.
func (p *program) waitExit(d time.Duration) (*os.ProcessState, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	msgs := p.msgs
	for {
		select {
		case <-p.child.Exited():
			return p.child.State(), true
		case _, ok := <-msgs:
			if !ok {
				p.over, msgs = true, nil
			}
		case <-t.C:
			return nil, false
		}
	}
}

// alive reports whether the program still runs and its output has not
// ended.
func (p *program) alive() bool {
	select {
	case <-p.child.Exited():
		return false
	default:
	}
	return !p.over
}

// kill stops the program and waits for its goroutines; the check is done
// with it. Closing its output ends the reader's wait even when a child of
// the program's holds the pipe.
func (p *program) kill() {
	p.once.Do(func() {
		close(p.stop)
		_ = p.child.Stdin.Close()
		_ = p.child.Kill()
		_ = p.child.Stdout.Close()
		p.wg.Wait()
	})
}

// handshake reads the hello and warms the program up, as the hello and
// warm cases do, for a case that needs a ready program.
func (p *program) handshake(ctx context.Context, opts *Options) error {
	m, err := p.next(ctx, opts.Timeout)
	if err != nil {
		return waitError(err, "hello", opts.Timeout)
	}
	if m.h.Type != stageproto.TypeHello {
		return fmt.Errorf("its first message is %q, not hello", m.h.Type)
	}
	return p.warm(ctx, opts)
}

// warm sends warm and waits for ready.
func (p *program) warm(ctx context.Context, opts *Options) error {
	if err := p.send(stageproto.Warm{Type: stageproto.TypeWarm, Config: opts.config()}, nil); err != nil {
		return err
	}
	deadline := time.Now().Add(opts.Timeout)
	for {
		m, err := p.next(ctx, time.Until(deadline))
		if err != nil {
			return waitError(err, "ready", opts.Timeout)
		}
		switch m.h.Type {
		case stageproto.TypeReady:
			return nil
		case stageproto.TypeError:
			return fmt.Errorf("it refused to warm up: %s", m.h.Message)
		case stageproto.TypeHello:
			return errors.New("it said hello twice")
		}
	}
}

// waitError is the error of a wait for what that ended with err.
func waitError(err error, what string, d time.Duration) error {
	if errors.Is(err, errWait) {
		return fmt.Errorf("no %s within %s", what, d)
	}
	return err
}
