package subprocess

// Starting a stage program (a program speaking the stage protocol on its
// standard input and output): one launcher, for the runtime and for the
// conformance check alike.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Program is a stage program to start.
type Program struct {
	// Argv is the program and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Dir is the directory it runs in; "" is the current one.
	Dir string
	// Env are the variables it gets beyond PATH.
	Env map[string]string
	// Stderr gets its standard error.
	Stderr *LineWriter
}

// Child is a started stage program. Its owner reads Stdout (and closes
// it), writes Stdin, and runs Wait once, on a goroutine of its own.
type Child struct {
	cmd     *exec.Cmd
	stderr  *os.File      // the read end of its standard error; nil without Program.Stderr
	copied  chan struct{} // closed once stderr is read to its end (or its bound)
	exited  chan struct{}
	waitErr error // Wait's, written before exited closes

	// Stdin is the program's standard input.
	Stdin io.WriteCloser
	// Stdout is the read end of the program's standard output: a pipe of
	// the owner's own, not exec's, so that its last messages can still be
	// read once it has exited (exec closes its own pipe then).
	Stdout *os.File
}

// Environ is a stage program's environment: PATH, so that it finds its
// tools, and env. Nothing else of the runtime's environment (its keys)
// reaches it.
func Environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// MissingModule reports whether lines, a program's last lines of standard
// error, say that it could not import a module (Python's
// ModuleNotFoundError, "No module named ..."): with the clean environment
// Start gives, the usual cause is a variable (PYTHONPATH) or a virtualenv
// the program does not get.
func MissingModule(lines []string) bool {
	for _, l := range lines {
		if strings.Contains(l, "ModuleNotFoundError") || strings.Contains(l, "No module named") {
			return true
		}
	}
	return false
}

// CleanEnvHint says what to do about a program that MissingModule finds,
// whose variables are given by env (the stage's options.env, stage
// check's --env K=V).
func CleanEnvHint(env string) string {
	return "the program's environment is clean (PATH and " + env + " only, nothing else of this one's): " +
		"name the Python that has the module in the command (a virtualenv's bin/python), " +
		"or give the program the variables it needs (PYTHONPATH) with " + env
}

// OutputDelay bounds the wait for a program's output to end once it has
// exited and what was left of its process group was killed: a process
// that left the group (setsid) and holds the program's standard output or
// error must not keep Wait from reporting the exit, nor the owner's reader
// from ending.
const OutputDelay = time.Second

// Start starts p in a process group of its own (SysProcAttr), with the
// environment Environ makes.
func Start(p Program) (*Child, error) {
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return nil, errors.New("no program to run")
	}
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = Environ(p.Env)
	cmd.SysProcAttr = SysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, copied: make(chan struct{}), exited: make(chan struct{}), Stdin: stdin}
	// Pipes of this process's own, not exec's, so that Wait returns as
	// the program exits, whoever else holds their write ends.
	var ends []*os.File // the write ends, the program's
	stdout, w, err := os.Pipe()
	if err == nil {
		c.Stdout, cmd.Stdout, ends = stdout, w, append(ends, w)
		if p.Stderr != nil {
			c.stderr, w, err = os.Pipe()
			cmd.Stderr, ends = w, append(ends, w)
		}
	}
	if err == nil {
		err = cmd.Start()
		if err != nil {
			err = fmt.Errorf("start %q: %w", p.Argv, err)
		}
	}
	for _, w := range ends {
		_ = w.Close()
	}
	if err != nil {
		for _, r := range []*os.File{c.Stdout, c.stderr} {
			if r != nil {
				_ = r.Close()
			}
		}
		_ = stdin.Close()
		return nil, err
	}
	go c.copyStderr(p.Stderr)
	return c, nil
}

// copyStderr hands the program's standard error to w until it ends (or
// its bound, once the program has exited), then its last line.
func (c *Child) copyStderr(w *LineWriter) {
	defer close(c.copied)
	if c.stderr == nil {
		return
	}
	_, _ = io.Copy(w, c.stderr)
	_ = c.stderr.Close()
	w.Flush()
}

// Pid is the program's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Wait waits for the program to exit, kills what is left of its process
// group (the helpers it started go with it, whether it exited by itself,
// was asked to or was killed), waits at most OutputDelay for its standard
// error to end, handing on its last line, and closes Exited. Past
// OutputDelay, reads of Stdout fail (os.ErrDeadlineExceeded) rather than
// wait for a process outside the group that holds it.
func (c *Child) Wait() {
	c.waitErr = c.cmd.Wait()
	_ = Kill(c.cmd.Process)
	bound := time.Now().Add(OutputDelay)
	_ = c.Stdout.SetReadDeadline(bound)
	if c.stderr != nil {
		_ = c.stderr.SetReadDeadline(bound)
	}
	<-c.copied
	close(c.exited)
}

// Exited is closed once the program has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// State is how the program ended; nil until Exited is closed.
func (c *Child) State() *os.ProcessState {
	select {
	case <-c.exited:
		return c.cmd.ProcessState
	default:
		return nil
	}
}

// How says how the program ended ("exit status 3", "signal: killed"),
// once Exited is closed.
func (c *Child) How() string {
	if st := c.State(); st != nil {
		return st.String()
	}
	select {
	case <-c.exited:
		return fmt.Sprint(c.waitErr)
	default:
		return "still running"
	}
}

// ExitedWithin waits at most d for the program to exit, and returns how
// it ended.
func (c *Child) ExitedWithin(d time.Duration) (*os.ProcessState, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return c.cmd.ProcessState, true
	case <-t.C:
		return nil, false
	}
}

// Terminate asks the program's process group to stop (Terminate).
func (c *Child) Terminate() error { return Terminate(c.cmd.Process) }

// Kill kills the program's process group (Kill).
func (c *Child) Kill() error { return Kill(c.cmd.Process) }
