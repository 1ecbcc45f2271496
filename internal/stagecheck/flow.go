package stagecheck

// The cases of flow control, driven by hand: a slow reader's credit for
// output, and the program's credit back for input.

import (
	"context"
	"errors"
	"time"

	"github.com/omnistage/omnistage/internal/stageproto"
)

// The flow cases' pace and bounds.
const (
	// slowWindow is the output window the slow reader gives.
	slowWindow = 1
	// settle is how long the slow reader waits, its window used up, for a
	// chunk beyond it before it gives credit the first time; creditPace
	// how long it waits each later time.
	settle     = 250 * time.Millisecond
	creditPace = 20 * time.Millisecond
	// maxWindow bounds the input window the input-credit case uses up.
	maxWindow = 1024
)

// slowReader: given an output window of one chunk and credit for one more
// at a time, slowly, the program never has more output chunks outstanding
// than its credit, and goes on as credit comes.
func (c *checker) slowReader(ctx context.Context) Result {
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	ctx, stop := c.bound(ctx, p, jobBound*c.opts.Timeout)
	defer stop()
	j, err := c.startJob(p, c.input, c.input.Chunks, nil, slowWindow)
	if err != nil {
		return fail("%v", err)
	}
	held := false // the window was used up once, and the program held on
	for {
		full := j.received-j.given == j.window
		wait := c.opts.Timeout
		if full {
			wait = creditPace
			if !held {
				wait = settle
			}
		}
		m, err := p.next(ctx, wait)
		switch {
		case errors.Is(err, errWait) && full:
			held = true
			if err := j.giveCredit(1); err != nil {
				return fail("%v", err)
			}
			continue
		case err != nil:
			return fail("%v", c.stalled(err, j))
		}
		ev, err := j.take(m)
		switch {
		case err != nil:
			return fail("%v", err)
		case ev == evEnd && j.end != stageproto.TypeDone:
			return fail("the job failed: %s", j.failed())
		case ev == evEnd && !held:
			return skip("the job made %s, within its output window of %d: the limit was not reached", plural(j.received, "output chunk"), j.window)
		case ev == evEnd:
			return pass("given an output window of %d and credit for one more chunk at a time, it sent no chunk beyond its credit and made %s, then done", j.window, plural(j.received, "output chunk"))
		}
	}
}

// inputCredit: the program, sent input up to its input window, gives
// credit back as it takes the chunks, and the job ends with done.
func (c *checker) inputCredit(ctx context.Context) Result {
	window := c.stage.Window
	if window > maxWindow {
		return skip("an input window of %d chunks is more than the check uses up (%d)", window, maxWindow)
	}
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	ctx, stop := c.bound(ctx, p, jobBound*c.opts.Timeout)
	defer stop()
	j, err := c.startJob(p, c.input, c.input.atLeast(window+2), nil, stageproto.DefaultWindow)
	if err != nil {
		return fail("%v", err)
	}
	for {
		m, err := p.next(ctx, c.opts.Timeout)
		if errors.Is(err, errWait) && j.inCredit == 0 && j.sent < len(j.in) {
			return fail("took %d input chunks (its window is %d) and gave no credit back within %s", j.sent-j.credited, window, c.opts.Timeout)
		}
		if err != nil {
			return fail("%v", c.stalled(err, j))
		}
		ev, err := j.take(m)
		switch {
		case err != nil:
			return fail("%v", err)
		case ev == evOutput:
			err = j.giveCredit(1)
		case ev == evEnd && j.end != stageproto.TypeDone:
			return fail("the job failed: %s", j.failed())
		case ev == evEnd && j.sent <= window:
			return skip("it ended the job after %s, before its input window of %d was used up (a program may end a job before its input does)", plural(j.sent, "input chunk"), window)
		case ev == evEnd:
			return pass("sent %d input chunks through an input window of %d, it gave credit back for %d, then done", j.sent, window, j.credited)
		}
		if err != nil {
			return fail("%v", err)
		}
	}
}
