package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

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

// RouteJSON is the shape `omnistage route --json` prints.
type RouteJSON struct {
	Pipeline string           `json:"pipeline"`
	Route    []int            `json:"route"`
	Skipped  []int            `json:"skipped"`
	Aligner  *int             `json:"aligner"`
	Stages   []RouteStageJSON `json:"stages"`
}

// RouteStageJSON is one stage of RouteJSON. Upstream and Downstream are null
// at the ends of the route and for skipped stages.
type RouteStageJSON struct {
	ID         int    `json:"id"`
	Name       string `json:"name"`
	Engine     string `json:"engine"`
	Upstream   *int   `json:"upstream"`
	Downstream *int   `json:"downstream"`
}

func routeJSON(c *pipeline.Config) RouteJSON {
	r := c.Route
	out := RouteJSON{Pipeline: c.Pipeline.Name, Route: r.Order(), Skipped: r.Skipped()}
	if out.Skipped == nil {
		out.Skipped = []int{}
	}
	if id, ok := r.Aligner(); ok {
		out.Aligner = &id
	}
	for id := range r.NumIDs() {
		engineName, _ := c.StageSpec(id, 0)
		s := RouteStageJSON{ID: id, Name: c.StageName(id), Engine: engineName}
		if up, ok := r.Upstream(id); ok {
			s.Upstream = &up
		}
		if down, ok := r.Downstream(id); ok {
			s.Downstream = &down
		}
		out.Stages = append(out.Stages, s)
	}
	return out
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
	rj := routeJSON(c)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rj); err != nil {
			return ExitFailure
		}
		return ExitOK
	}
	printRoute(env.Stdout, c, rj)
	return ExitOK
}

func printRoute(w io.Writer, c *pipeline.Config, rj RouteJSON) {
	fmt.Fprintf(w, "pipeline: %s (%s)\n", rj.Pipeline, c.Source)
	fmt.Fprintf(w, "route: %s\n", joinIDs(rj.Route, " -> "))
	if tr := c.Route.Transitions(); tr == nil {
		fmt.Fprintln(w, "transitions: omitted (stages run in id order)")
	} else {
		parts := make([]string, len(tr))
		for i, e := range tr {
			parts[i] = fmt.Sprintf("[%d, %d]", e[0], e[1])
		}
		fmt.Fprintf(w, "transitions: %s\n", strings.Join(parts, " "))
	}
	if len(rj.Skipped) == 0 {
		fmt.Fprintln(w, "skipped: none")
	} else {
		fmt.Fprintf(w, "skipped: %s (initialized, never sent requests)\n", joinIDs(rj.Skipped, ", "))
	}
	if rj.Aligner != nil {
		fmt.Fprintf(w, "aligner: %d (%s) after stage %d\n", *rj.Aligner, c.Pipeline.Aligner.Engine, c.Route.Tail())
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
	for _, s := range rj.Stages {
		note := ""
		if !c.Route.OnRoute(s.ID) {
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
