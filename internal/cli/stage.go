package cli

// The stage command: stage check puts a stage program through the stage
// protocol's conformance battery (package stagecheck).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stagecheck"
)

const stageCheckSynopsis = "stage check [--timeout D] [--config JSON] [--input-file F --input-kind K] [--cwd DIR] [--env K=V ...] [-v] [--json] -- CMD..."

func stage(ctx context.Context, env Env, args []string) int {
	if len(args) > 0 && args[0] == "check" {
		return stageCheck(ctx, env, args[1:])
	}
	fmt.Fprintf(env.Stderr, "usage: omnistage %s\n", stageCheckSynopsis)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return ExitOK
	}
	return ExitUsage
}

func stageCheck(ctx context.Context, env Env, args []string) int {
	fs := newFlags(env, "stage check", stageCheckSynopsis)
	timeout := fs.Duration("timeout", stagecheck.DefaultTimeout, "bound of each wait for the program: its hello, ready, a job's end, an answer")
	config := fs.String("config", "", "the config the program warms up with, a JSON object (default {})")
	inputFile := fs.String("input-file", "", "a file holding the input of the jobs: text, a WAV file, or the bytes of a chunk of a pipeline's own kind")
	inputKind := fs.String("input-kind", "", "the kind of --input-file: text, audio (a WAV file), image (a PNG, JPEG or WebP file), or a kind of a pipeline's own")
	cwd := fs.String("cwd", "", "the directory the program runs in (default: this one)")
	var envs multiFlag
	fs.Var(&envs, "env", "a variable `K=V` of the program's environment, beyond PATH (repeatable)")
	verbose := fs.Bool("v", false, "pass the program's standard error on to this one's")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	// Everything after -- is the program's, flags included.
	flags, command := args, []string(nil)
	if i := slices.Index(args, "--"); i >= 0 {
		flags, command = args[:i], args[i+1:]
	}
	pos, status, ok := parse(fs, flags)
	if !ok {
		return status
	}
	opts, err := checkOptions(command, pos, *config, *inputFile, *inputKind, envs)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage stage check: %v\n", err)
		return ExitUsage
	}
	opts.Timeout, opts.Cwd = *timeout, *cwd
	if *verbose {
		opts.Stderr = env.Stderr
	}
	if !*asJSON {
		opts.Out = env.Stdout
	}
	rep := stagecheck.Run(ctx, opts)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return ExitFailure
		}
	} else {
		fmt.Fprintln(env.Stdout, rep.SummaryLine())
	}
	if !rep.OK {
		return ExitFailure
	}
	return ExitOK
}

// checkOptions checks stage check's arguments and makes its options of
// them.
func checkOptions(command, pos []string, config, inputFile, inputKind string, envs []string) (stagecheck.Options, error) {
	var opts stagecheck.Options
	switch {
	case len(pos) > 0:
		return opts, fmt.Errorf("unexpected argument %q: the program and its arguments go after --", pos[0])
	case len(command) == 0 || command[0] == "":
		return opts, fmt.Errorf("no program: give it after --, as in: omnistage stage check -- python3 stage.py")
	case (inputFile == "") != (inputKind == ""):
		return opts, fmt.Errorf("--input-file and --input-kind go together")
	}
	opts.Command = command
	if config != "" {
		var v any
		if err := json.Unmarshal([]byte(config), &v); err != nil {
			return opts, fmt.Errorf("--config: %v", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return opts, fmt.Errorf("--config must be a JSON object")
		}
		opts.Config = json.RawMessage(config)
	}
	if inputFile != "" {
		data, err := os.ReadFile(inputFile)
		if err != nil {
			return opts, fmt.Errorf("--input-file: %v", err)
		}
		if opts.Input, err = stagecheck.NewInput(engine.Kind(inputKind), data); err != nil {
			return opts, fmt.Errorf("--input-file %s: %v", inputFile, err)
		}
	}
	for _, kv := range envs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return opts, fmt.Errorf("--env %q: want K=V", kv)
		}
		if opts.Env == nil {
			opts.Env = map[string]string{}
		}
		opts.Env[k] = v
	}
	return opts, nil
}
