package stagecheck

// The program run by the runtime's own engine (package external), as a
// deployed stage's replica, for the case of the runtime's own check of
// params; and the wording of the engine's errors.

import (
	"context"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/external"
)

// startEngine starts the program with the engine and warms it up; the
// caller closes it. The engine drives no job of the battery's: a job of a
// program that dies as the engine writes to it can end without the
// program's loss (and a job started then, with a panic), which a check of
// broken programs must not risk.
func (c *checker) startEngine(ctx context.Context) (*external.Engine, error) {
	c.discard() // one program at a time
	spec := engine.Spec{Name: c.name(), Input: c.stage.Input, Output: c.stage.Output, Replica: c.programs,
		WarmTimeout: c.opts.Timeout,
		Options: engine.Options{"command": c.opts.Command, "cwd": c.opts.Cwd, "env": c.opts.Env,
			"config": c.opts.config()}}
	c.programs++
	e, err := external.New(spec, external.Config{Stderr: c.lines.engine(), CancelTimeout: c.opts.CancelTimeout})
	if err != nil {
		return nil, err
	}
	if err := e.Warm(ctx); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

// engineMessage is an engine error's message without what the report says
// elsewhere: the engine's name, the command, the replica, its pid and the
// program's last lines (the result's stderr).
func engineMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, "; its last output:"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, ": "+engine.ErrReplicaLost.Error())
	s = withHint(s)
	rest, ok := strings.CutPrefix(s, external.Name+": program ")
	if !ok {
		return strings.TrimPrefix(s, external.Name+": ")
	}
	for _, end := range []string{"): ", "]: "} {
		if i := strings.Index(rest, end); i >= 0 {
			return rest[i+len(end):]
		}
	}
	return s
}
