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
	if err := c.CheckEngines(reg.Has, reg.Names()); err != nil {
		return nil, err
	}
	return c, nil
}

// printConfigError writes a configuration error, one reason per line.
func printConfigError(w io.Writer, err error) {
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
	fs := newFlags(env, "route", "route [--config F] [--json]")
	config := fs.String("config", "", "pipeline config file, or builtin:NAME (default: the built-in tts pipeline)")
	asJSON := fs.Bool("json", false, "print the route as JSON")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.Stderr, "omnistage route: unexpected argument %q\n", pos[0])
		return ExitUsage
	}
	c, err := env.loadConfig(*config)
	if err != nil {
		printConfigError(env.Stderr, err)
		return ExitUsage
	}
	info := apijson.DescribePipeline(c)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(info); err != nil {
			return ExitFailure
		}
		return ExitOK
	}
	printRoute(env.Stdout, c, info)
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
