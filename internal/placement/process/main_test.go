package process_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testkit"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/cli"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/process"
)

// The test binary is also the worker executable (the worker engine starts
// os.Executable()): these variables tell a process of it what to be.
const (
	// workerEnv set to 1: run the command line (serve --worker ...) with
	// the test engines, steered by workerHooks.
	workerEnv = "OMNISTAGE_WORKER_TEST"
	// parentEnv set to a config file: start a worker for its stage 1,
	// print the worker's pid and wait to be killed.
	parentEnv = "OMNISTAGE_WORKER_TEST_PARENT"
	// hangEnv set to 1: a worker's test engines never finish closing.
	hangEnv = "OMNISTAGE_WORKER_TEST_HANG"
	// chattyEnv set to 1: a worker prints a line on stdout before it
	// announces its address, as a C library may.
	chattyEnv = "OMNISTAGE_WORKER_TEST_CHATTY"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(parentEnv) != "":
		os.Exit(runParent(os.Getenv(parentEnv)))
	case os.Getenv(workerEnv) == "1":
		os.Exit(runWorker())
	}
	// Every worker the tests start inherits these. A race-enabled
	// program sleeps a second before it exits unless told not to.
	os.Setenv(workerEnv, "1")
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m)
}

// runWorker is main for a worker process.
func runWorker() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv(chattyEnv) == "1" {
		fmt.Println("chatter before the announcement")
	}
	env := cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Engines: workerEngines}
	code := cli.Main(ctx, env, os.Args[1:])
	// As in cmd/omnistage: a late SIGTERM must not turn a clean exit into
	// death by signal.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	return code
}

var testEngines = []string{"test-a", "test-b", "test-c"}

func workerEngines(r *engine.Registry) {
	shipped.Register(r, nil)
	testengine.Register(r, workerHooks(), testEngines...)
}

// workerHooks steer a worker's test engines by the request's tag param:
//
//	crash        the process exits with status 3, once the call has taken
//	             its first input chunk (a worker that dies before it took
//	             anything of the request is a refused call, which the
//	             runtime moves to another replica)
//	panic        the same, by a panic
//	block        the call waits for its cancellation, noting on stderr
//	             "block: started" and "block: cancelled"
//	gate:PATH    the call waits until the file PATH exists
//	flood        the call writes 8 MiB of lines to stderr
//	say:TEXT     the call writes the line TEXT to stderr
func workerHooks() *testengine.Hooks {
	return &testengine.Hooks{
		Process: func(ctx context.Context, e *testengine.Engine, job *engine.Job) error {
			var p testengine.Params
			_ = engine.DecodeParams(job.Params, &p)
			if p.Tag == "crash" || p.Tag == "panic" {
				_, _ = job.In.Recv(ctx) // the request is under way in this worker
			}
			switch {
			case p.Tag == "crash":
				os.Exit(3)
			case p.Tag == "panic":
				panic("the test asked this worker to panic")
			case p.Tag == "block":
				fmt.Fprintln(os.Stderr, "block: started")
				<-ctx.Done()
				fmt.Fprintln(os.Stderr, "block: cancelled")
				return ctx.Err()
			case p.Tag == "flood":
				line := strings.Repeat("x", 1023) + "\n"
				for range 8 << 10 {
					_, _ = os.Stderr.WriteString(line)
				}
			case strings.HasPrefix(p.Tag, "say:"):
				fmt.Fprintln(os.Stderr, strings.TrimPrefix(p.Tag, "say:"))
			case strings.HasPrefix(p.Tag, "gate:"):
				for {
					if _, err := os.Stat(strings.TrimPrefix(p.Tag, "gate:")); err == nil {
						return nil
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			return nil
		},
		Close: func(e *testengine.Engine) {
			if os.Getenv(hangEnv) == "1" {
				time.Sleep(time.Hour)
			}
		},
	}
}

// runParent is main for a parent process that the test kills: it starts a
// worker for stage 1 of the pipeline in file, prints its pid and waits.
func runParent(file string) int {
	os.Unsetenv(parentEnv)
	cfg, err := pipeline.Load(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, spec := cfg.StageSpec(1, 0)
	e, err := process.New(process.Config{Stage: spec, Pipeline: cfg})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(e.Pid())
	time.Sleep(time.Hour)
	return 0
}

// processGone reports whether process pid has ended: it no longer exists,
// or it is a zombie (an orphan's new parent may not reap it).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}

var _ io.Writer = (*testkit.SyncBuffer)(nil)
