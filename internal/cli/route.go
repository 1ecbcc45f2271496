package cli

// The route command, and the loading of --config that the commands share.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// loadConfig loads --config, or the default built-in pipeline when empty,
// and checks its engine names against the engines env provides.
func (env Env) loadConfig(ref string) (*pipeline.Config, error) {
	if ref == "" {
		ref = "builtin:" + pipeline.DefaultBuiltin
	}
	c, err := pipeline.Load(ref)
	if err != nil {
		return nil, err
	}
	reg := env.registry()
	if err := c.CheckEngines(reg); err != nil {
		return nil, err
	}
	return c, nil
}

// loadPipelines loads the pipelines of refs (files of one or more
// pipelines, or builtin:NAME; none means every built-in pipeline) and
// checks their engines against env's registry.
func (env Env) loadPipelines(refs []string) ([]*pipeline.Config, error) {
	if len(refs) == 0 {
		for _, name := range pipeline.Builtins() {
			refs = append(refs, "builtin:"+name)
		}
	}
	cfgs, err := pipeline.LoadAll(refs)
	if err != nil {
		return nil, err
	}
	reg := env.registry()
	var errs []error
	for _, c := range cfgs {
		errs = append(errs, c.CheckEngines(reg))
	}
	return cfgs, errors.Join(errs...)
}

// pickPipeline returns the pipeline of cfgs named name; with name "",
// tts when it is among them and there are several, or the one there is.
// flag names the flag that names it, for the error.
func pickPipeline(cfgs []*pipeline.Config, name, flag string) (*pipeline.Config, error) {
	if name == "" && len(cfgs) == 1 {
		return cfgs[0], nil
	}
	if name == "" {
		name = pipeline.DefaultBuiltin
	}
	names := make([]string, len(cfgs))
	for i, c := range cfgs {
		if c.Pipeline.Name == name {
			return c, nil
		}
		names[i] = c.Pipeline.Name
	}
	return nil, fmt.Errorf("%s: no pipeline %s among those served (%s)", flag, name, strings.Join(names, ", "))
}

// printConfigError writes a configuration error, one reason per line.
func printConfigError(w io.Writer, err error) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			printConfigError(w, e)
		}
		return
	}
	var errs pipeline.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(w, e.Error())
		}
		return
	}
	fmt.Fprintln(w, err)
}

func route(_ context.Context, env Env, args []string) int {
	fs := newFlags(env, "route", "route [--config F ...] [--json]")
	var configs multiFlag
	fs.Var(&configs, "config", "pipeline config file (one pipeline per YAML document), or builtin:NAME; repeatable (default: every built-in pipeline, as serve serves them)")
	asJSON := fs.Bool("json", false, "print the route as JSON (an array when there are several pipelines)")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.Stderr, "omnistage route: unexpected argument %q\n", pos[0])
		return ExitUsage
	}
	cfgs, err := env.loadPipelines(configs)
	switch {
	case err != nil && len(configs) == 0 && len(cfgs) > 0:
		// As serve without --config: the built-ins whose engines this
		// build lacks are served all the same, and answer 503.
		fmt.Fprintln(env.Stderr, "omnistage route: some built-in pipelines cannot start in this build (serve answers them with 503):")
		printConfigError(env.Stderr, err)
	case err != nil:
		printConfigError(env.Stderr, err)
		return ExitUsage
	}
	infos := make([]apijson.PipelineInfo, len(cfgs))
	for i, c := range cfgs {
		infos[i] = apijson.DescribePipeline(c)
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		var v any = infos
		if len(infos) == 1 {
			v = infos[0]
		}
		if err := enc.Encode(v); err != nil {
			return ExitFailure
		}
		return ExitOK
	}
	for i, c := range cfgs {
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		printRoute(env.Stdout, c, infos[i])
	}
	return ExitOK
}

// printRoute writes the route as text: the JSON's facts, and the
// transitions.
func printRoute(w io.Writer, c *pipeline.Config, info apijson.PipelineInfo) {
	fmt.Fprintf(w, "pipeline: %s (%s)\n", info.Name, c.Source)
	fmt.Fprintf(w, "route: %s\n", joinIDs(info.Route, " -> "))
	if tr := c.Route.Transitions(); tr == nil {
		fmt.Fprintln(w, "transitions: omitted (stages run in id order)")
	} else {
		parts := make([]string, len(tr))
		for i, e := range tr {
			parts[i] = fmt.Sprintf("[%d, %d]", e[0], e[1])
		}
		fmt.Fprintf(w, "transitions: %s\n", strings.Join(parts, " "))
	}
	if skipped := c.Route.Skipped(); len(skipped) == 0 {
		fmt.Fprintln(w, "skipped: none")
	} else {
		fmt.Fprintf(w, "skipped: %s (initialized, never sent requests)\n", joinIDs(skipped, ", "))
	}
	stages := info.Stages
	if a := info.Aligner; a != nil {
		fmt.Fprintf(w, "aligner: %d (%s) after stage %d\n", a.ID, a.Engine, c.Route.Tail())
		stages = append(stages, *a)
	} else {
		fmt.Fprintln(w, "aligner: none")
	}
	fmt.Fprintln(w, "stages:")
	peer := func(p *int) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	for _, s := range stages {
		note := ""
		if s.Skipped {
			note = "  (skipped)"
		}
		fmt.Fprintf(w, "  %d %-10s %-15s upstream: %-2s downstream: %s%s\n", s.ID, s.Name, s.Engine, peer(s.Upstream), peer(s.Downstream), note)
	}
}

func joinIDs(ids []int, sep string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, sep)
}
