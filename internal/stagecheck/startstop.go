package stagecheck

// The cases of a program's start and stop: hello, warm, shutdown and the
// end of its standard input.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/stageproto"
)

// hello: the program's first message is a valid hello.
func (c *checker) hello(ctx context.Context) Result {
	p, err := c.start()
	if err != nil {
		return fail("%v", err)
	}
	c.first = p
	m, err := p.next(ctx, c.opts.Timeout)
	switch {
	case errors.Is(err, errWait):
		return fail("no hello within %s", c.opts.Timeout)
	case err != nil:
		return fail("no hello: %v", err)
	case m.h.Type != stageproto.TypeHello:
		return fail("its first message is %q, not hello", m.h.Type)
	}
	stage, problems := checkHello(&m.h)
	if len(problems) > 0 {
		return fail("its hello: %s", strings.Join(problems, "; "))
	}
	c.stage = stage
	c.input, c.noInput = c.jobInput()
	return pass("%s", stage)
}

// jobInput is the input of the stage's jobs, or why there is none.
func (c *checker) jobInput() (*Input, string) {
	if in := c.opts.Input; in != nil {
		if in.Kind != c.stage.Input {
			return nil, fmt.Sprintf("the input given is %s, but the stage takes %s", in.Kind, c.stage.Input)
		}
		return in, ""
	}
	return typicalInput(c.stage.Input)
}

// warm: warm gets ready within the timeout.
func (c *checker) warm(ctx context.Context) Result {
	if c.first == nil || c.stage == nil {
		return skip("no valid hello (see hello)")
	}
	t0 := time.Now()
	if err := c.first.warm(ctx, c.opts); err != nil {
		return fail("%v", err)
	}
	c.started = true
	return pass("ready in %s", took(t0))
}

// ready starts a program and brings it to ready, for a case of its own.
func (c *checker) ready(ctx context.Context) (*program, error) {
	p, err := c.start()
	if err != nil {
		return nil, err
	}
	if err := p.handshake(ctx, c.opts); err != nil {
		p.kill()
		return nil, fmt.Errorf("a fresh run of the program did not get ready: %w", err)
	}
	return p, nil
}

// shutdown: a ready program asked to shut down exits with status 0 within
// the stop timeout, its standard input still open.
func (c *checker) shutdown(ctx context.Context) Result {
	p := c.first
	c.first = nil
	if p == nil || !p.alive() {
		var err error
		if p, err = c.ready(ctx); err != nil {
			return fail("%v", err)
		}
	}
	defer p.kill()
	t0 := time.Now()
	if err := p.send(stageproto.Bare{Type: stageproto.TypeShutdown}, nil); err != nil {
		return fail("%v", err)
	}
	return c.exited(p, t0, "shutdown", " (its standard input still open)")
}

// stdinEOF: a ready program whose standard input ends exits with status 0
// within the stop timeout.
func (c *checker) stdinEOF(ctx context.Context) Result {
	p, err := c.ready(ctx)
	if err != nil {
		return fail("%v", err)
	}
	defer p.kill()
	t0 := time.Now()
	if err := p.child.Stdin.Close(); err != nil {
		return fail("closing its standard input: %v", err)
	}
	return c.exited(p, t0, "the end of its standard input", "")
}

// exited judges how p ended after what asked it to.
func (c *checker) exited(p *program, t0 time.Time, what, note string) Result {
	st, ok := p.waitExit(c.opts.StopTimeout)
	switch {
	case !ok:
		return fail("did not exit within %s of %s%s", c.opts.StopTimeout, what, note)
	case st.ExitCode() != 0:
		return fail("%s %s after %s, not with status 0", st, took(t0), what)
	}
	return pass("exited with status 0 %s after %s", took(t0), what)
}

// took is the time since t0, to the millisecond (the microsecond below
// one).
func took(t0 time.Time) time.Duration {
	d := time.Since(t0)
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
