// Package stagecheck is the stage protocol's conformance battery
// (docs/stage-protocol.md, Checking a stage): Run starts a program the way
// the runtime starts a stage's, puts it through a list of cases and
// reports each by name, passed, failed, warned or skipped, with what was
// expected and what happened.
//
// The cases drive the protocol by hand over the program's pipes, every
// message checked as it comes (credit counted in both directions, output
// beyond it a failure); the case of the runtime's own check of params
// runs the program with the runtime's engine (package external). Every
// wait for the program is bounded (Options.Timeout, and the protocol's
// bounds for cancel, checks and shutdown), a case that may break the
// program runs it afresh, and a program that fails a case is not used
// again: a broken program makes its cases fail, never the battery hang or
// crash.
package stagecheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/omnistage/omnistage/internal/engine/external"
	"github.com/omnistage/omnistage/internal/subprocess"
)

// Options configure a battery.
type Options struct {
	// Command is the program and its arguments.
	Command []string
	// Cwd is the directory it runs in; "" is the current one.
	Cwd string
	// Env are the variables it gets beyond PATH, as a stage's env.
	Env map[string]string
	// Config is the warm message's config, an object; nil sends {}.
	Config json.RawMessage
	// Input is the input of the jobs; nil makes up a typical one for the
	// stage's input kind.
	Input *Input
	// Timeout bounds each wait for the program: its hello, ready, a job's
	// end, an answer, output once it has credit. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// CancelTimeout bounds the wait for the answer to cancel; zero means
	// the protocol's (external.DefaultCancelTimeout).
	CancelTimeout time.Duration
	// StopTimeout bounds the wait for the program's exit once asked to;
	// zero means the runtime's (external.StopTimeout).
	StopTimeout time.Duration
	// Out gets each case's result as text as the case ends; nil: none.
	Out io.Writer
	// Stderr gets the programs' standard error, a line at a time, each
	// prefixed with the program; nil discards it (a failed case reports
	// its last lines).
	Stderr io.Writer
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 10 * time.Second

func (o *Options) config() json.RawMessage {
	if len(o.Config) == 0 {
		return json.RawMessage("{}")
	}
	return o.Config
}

// testCase is one case of the battery.
type testCase struct {
	name string
	// started: the case needs a program that said hello and warmed up;
	// input: and an input for its jobs; jobs: and a stage that takes jobs
	// (not batches).
	started, input, jobs bool
	run                  func(*checker, context.Context) Result
}

// cases is the battery, in the order it runs.
var cases = []testCase{
	{name: "hello", run: (*checker).hello},
	{name: "warm", run: (*checker).warm},
	{name: "shutdown", started: true, run: (*checker).shutdown},
	{name: "stdin-eof", started: true, run: (*checker).stdinEOF},
	{name: "unknown-param", started: true, run: (*checker).unknownParam},
	{name: "job", started: true, jobs: true, run: (*checker).job},
	{name: "concurrent", started: true, jobs: true, input: true, run: (*checker).concurrent},
	{name: "cancel", started: true, jobs: true, input: true, run: (*checker).cancel},
	{name: "check-param", started: true, run: (*checker).checkParam},
	{name: "bad-params", started: true, jobs: true, run: (*checker).badParams},
	{name: "bad-input", started: true, jobs: true, run: (*checker).badInput},
	{name: "slow-reader", started: true, jobs: true, input: true, run: (*checker).slowReader},
	{name: "input-credit", started: true, jobs: true, input: true, run: (*checker).inputCredit},
	{name: "batch", started: true, run: (*checker).batch},
}

// CaseNames lists the battery's cases, in the order they run.
func CaseNames() []string {
	names := make([]string, len(cases))
	for i, tc := range cases {
		names[i] = tc.name
	}
	return names
}

// Run puts the program of opts through the battery and reports each case.
// It returns when every case has ended, or soon after ctx ends (the
// remaining cases are skipped and the report is Interrupted); no program
// it started runs on.
func Run(ctx context.Context, opts Options) Report {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.CancelTimeout <= 0 {
		opts.CancelTimeout = external.DefaultCancelTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = external.StopTimeout
	}
	c := &checker{opts: &opts, lines: &lines{w: opts.Stderr}}
	defer c.discard()
	rep := Report{Command: opts.Command}
	start := time.Now()
	for _, tc := range cases {
		var r Result
		t0 := time.Now()
		switch {
		case ctx.Err() != nil:
			rep.Interrupted = true
			r = skip("interrupted")
		case tc.started && !c.started:
			r = skip("the program did not start (see hello and warm)")
		case tc.jobs && c.stage.MaxBatch > 0:
			r = skip("the stage takes batches (max_batch %d): the runtime sends it no job (see batch)", c.stage.MaxBatch)
		case tc.input && c.input == nil:
			r = skip("no input (see job)")
		default:
			c.lines.reset()
			r = tc.run(c, ctx)
			if r.Status == Fail {
				r.Stderr = c.lines.last()
				if subprocess.MissingModule(r.Stderr) {
					r.Detail += "; " + subprocess.CleanEnvHint("--env K=V")
				}
				c.discard() // a program that failed a case is not trusted with the next
			}
			if ctx.Err() != nil {
				rep.Interrupted = true
			}
		}
		r.Name, r.Seconds = tc.name, seconds(time.Since(t0))
		rep.Cases = append(rep.Cases, r)
		if opts.Out != nil {
			r.WriteText(opts.Out)
		}
	}
	rep.Stage = c.stage
	rep.finish(time.Since(start))
	return rep
}

// checker is one battery's state: what the stage said it is, and the
// programs running for the cases to come.
type checker struct {
	opts  *Options
	lines *lines

	stage   *Stage   // from the hello case
	first   *program // the hello and warm cases' program, until shutdown's
	started bool     // the hello and warm cases passed
	input   *Input   // the jobs' input; nil when there is none
	noInput string   // why input is nil

	raw      *program // the program the job cases drive by hand
	programs int      // programs started: each one's replica number
}

// name is the stage's name in the programs' lines of standard error.
func (c *checker) name() string {
	if c.stage != nil && c.stage.Name != "" {
		return c.stage.Name
	}
	return "stage"
}

// start starts a program to drive by hand.
func (c *checker) start() (*program, error) {
	if len(c.opts.Command) == 0 || c.opts.Command[0] == "" {
		return nil, errors.New("no program to run")
	}
	id := fmt.Sprintf("%s/%d", c.name(), c.programs)
	c.programs++
	return startProgram(c.opts, c.lines.program("stage "+id+": "))
}

// discard stops the programs left running.
func (c *checker) discard() {
	for _, p := range []**program{&c.first, &c.raw} {
		if *p != nil {
			(*p).kill()
			*p = nil
		}
	}
}
