// Package cli implements the omnistage command line: one function per
// subcommand, each taking its arguments and streams so tests can run it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/process"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/telemetry"
	"github.com/omnistage/omnistage/internal/turns"
)

// Env is what a command runs with.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (os.Getenv in main).
	Getenv func(string) string
	// Engines adds the engines a pipeline may use to a registry; nil means
	// builtin.Register, what a release ships. Tests add test engines.
	Engines func(*engine.Registry)
}

// registry returns a registry holding the engines env provides.
func (env Env) registry() *engine.Registry {
	if env.Engines == nil {
		r := &engine.Registry{}
		shipped.Register(r, env.Stderr)
		return r
	}
	r := &engine.Registry{}
	env.Engines(r)
	return r
}

// orchestratorOptions are the options of an orchestrator for cfg: env's
// engines, and the placements that run stages in worker processes (whose
// output goes to env's stderr) and on stage servers (whose hops codec
// signs), all traced by tp (nil: not traced). Its requests take turns on
// the CPU from sched, and so do its workers' (each from a scheduler of
// its own); a nil sched runs every unit of work at once, here and in the
// workers.
func (env Env) orchestratorOptions(cfg *pipeline.Config, codec *payload.Codec, tp trace.TracerProvider, sched *turns.Scheduler) orchestrator.Options {
	var workerFlags []string
	if sched == nil {
		workerFlags = []string{"--turns=false"}
	}
	return orchestrator.Options{
		Registry: env.registry(),
		Placements: map[pipeline.Placement]orchestrator.Placement{
			pipeline.PlacementRemote:  &remote.Placement{Pipeline: cfg, Codec: codec, TracerProvider: tp},
			pipeline.PlacementProcess: &process.Placement{Pipeline: cfg, Flags: workerFlags, Stderr: env.Stderr, TracerProvider: tp},
		},
		TracerProvider: tp,
		Turns:          sched,
	}
}

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, env Env, args []string) int
}

func commands() []command {
	return []command{
		{"say", "say [--config F] [--voice V] [--speed S] [--timestamps] [-o out.wav] TEXT   synthesize offline ('-' reads stdin)", say},
		{"ocr", "ocr [--config F] [--json] IMAGE   read the text of an image offline ('-' reads stdin)", ocr},
		{"route", "route [--config F] [--json]   print the resolved route", route},
		{"run", "run --stage URL [--stage URL ...] [-o out.wav] [--timestamps] TEXT   drive stage servers over /v1/run", runCoordinator},
		{"serve", "serve [--config F] [--addr A] [--stage N] [...]   serve the HTTP API (serve -h: all flags)", serve},
		{"bench", "bench (--url URL | --config F) [-n N | --duration D] [-c C | --rate R] [--abort-ratio X] [--json]   load a server and report", bench},
		{"stage", "stage check [--timeout D] [--config JSON] [--input-file F --input-kind K] [--json] -- CMD...   check a stage program against the stage protocol", stage},
	}
}

// Main runs the command line and returns the process exit status.
func Main(ctx context.Context, env Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "omnistage: unknown command %q\n", args[0])
	usage(env.Stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: omnistage COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  omnistage %s\n", c.usage)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'omnistage COMMAND -h' for a command's flags.")
	fmt.Fprintln(w, "Every command traces with OpenTelemetry when the OTEL_* variables ask for it")
	fmt.Fprintln(w, "(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER=otlp|console|none, ...; README, Tracing).")
}

// newFlags returns a flag set that reports errors to env.Stderr.
func newFlags(env Env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: omnistage %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before or after positional arguments.
// When ok is false the command must return status at once (bad flags, or
// -h printed the usage).
func parse(fs *flag.FlagSet, args []string) (pos []string, status int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ExitOK, false
			}
			return nil, ExitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// startTracing sets up tracing from the OTEL_* environment for a process
// in role (see package telemetry), and returns it with the function that
// flushes its spans, which the command calls as it ends. A setting that
// cannot be honoured is reported as command's error.
func (env Env) startTracing(ctx context.Context, command, role string) (*telemetry.Tracing, func(), error) {
	t, err := telemetry.FromEnv(ctx, env.Getenv, env.Stderr, role)
	if err != nil {
		return nil, nil, err
	}
	return t, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage %s: exporting traces: %v\n", command, err)
		}
	}, nil
}
