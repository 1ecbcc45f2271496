package stagecheck

// The cases of params: a name hello does not declare, a value of the
// wrong JSON type checked, and a job given it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/external"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// unknownName is the param the unknown-param case gives.
const unknownName = "omnistage_check_unknown"

// unknownParam: a param hello does not declare is refused by the runtime's
// own check, naming it, before it reaches the program.
func (c *checker) unknownParam(ctx context.Context) Result {
	if len(c.stage.Params) == 0 {
		return skip("hello declares no params: the runtime checks no names and hands any params to the program")
	}
	e, err := c.startEngine(ctx)
	if err != nil {
		return fail("the runtime's engine could not start the program: %s", engineMessage(err))
	}
	defer e.Close()
	err = e.CheckParams(json.RawMessage(`{"` + unknownName + `": 1}`))
	var pe *engine.ParamError
	if !errors.As(err, &pe) || pe.Field != unknownName {
		return fail("the runtime's check of {%q: 1} returned %v; want a refusal naming %s", unknownName, err, unknownName)
	}
	return pass("{%q: 1} is refused by the runtime before it reaches the program: %s", unknownName, pe.Reason)
}

// wrongParam returns the first param hello declares and a value of a JSON
// type other than the one it declares.
func (c *checker) wrongParam() (name string, params json.RawMessage) {
	name = c.stage.paramNames()[0]
	params, _ = json.Marshal(map[string]any{name: wrongValue(c.stage.Params[name].Type)})
	return name, params
}

// wrongValue is a value that is not of the JSON type typ names; for a type
// it does not know, an object, which few params take.
func wrongValue(typ string) any {
	switch strings.ToLower(typ) {
	case "number", "integer", "int", "float":
		return "not a number"
	case "string":
		return 42
	case "boolean", "bool":
		return "not a boolean"
	case "array", "list":
		return "not an array"
	case "object", "map":
		return "not an object"
	}
	return map[string]any{"not": "a value of a known type"}
}

// checkParam: a check of a declared param with a value of the wrong JSON
// type is answered within the runtime's bound, with an error naming the
// param or an acceptance: the result says which.
func (c *checker) checkParam(ctx context.Context) Result {
	if len(c.stage.Params) == 0 {
		return skip("hello declares no params")
	}
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	name, params := c.wrongParam()
	f, err := c.check(ctx, p, params)
	if err != nil {
		return fail("%v", err)
	}
	switch {
	case f == nil:
		return pass("accepted %s: the program checks no types (its jobs get the value as it is)", params)
	case f.Field == "":
		return warn("refused %s without naming a field (%s): a client's 400 then names none", params, f.Reason)
	case f.Field != name:
		return warn("refused %s naming the field %q, not %q: %s", params, f.Field, name, f.Reason)
	}
	return pass("refused %s: %s: %s", params, f.Field, f.Reason)
}

// badParams: a job given params the stage refuses fails with bad_params
// naming the field.
func (c *checker) badParams(ctx context.Context) Result {
	if len(c.stage.Params) == 0 {
		return skip("hello declares no params")
	}
	p, r, ok := c.rawProgram(ctx)
	if !ok {
		return r
	}
	name, params := c.wrongParam()
	in, chunks := &Input{Prompt: sentence}, []engine.Chunk(nil) // no input: the job's params alone
	if c.input != nil {
		in, chunks = c.input, c.input.Chunks
	}
	j, err := c.runOne(ctx, p, in, chunks, params)
	switch {
	case err != nil:
		return fail("a job given %s: %v", params, err)
	case j.end == stageproto.TypeDone:
		return warn("a job given %s ran (%s): the stage takes any value of %s", params, outputOf(j.out), name)
	case j.fault.Code != stageproto.CodeBadParams:
		return fail("a job given %s failed with %s; want bad_params naming %s", params, j.failed(), name)
	case j.fault.Field == "":
		return fail("a job given %s failed with bad_params naming no field (%s): the error must name the field", params, j.fault.Message)
	case !slices.Contains(c.stage.paramNames(), j.fault.Field):
		return fail("a job given %s failed with bad_params naming %q, which is not a param: %s", params, j.fault.Field, j.fault.Message)
	}
	return pass("a job given %s failed with %s", params, j.failed())
}

// check sends a check of params to p and returns its answer's fault (nil
// when it accepts them), waiting for it as long as the runtime does.
func (c *checker) check(ctx context.Context, p *program, params json.RawMessage) (*stageproto.ParamFault, error) {
	p.jobs++ // checks and jobs share the numbers, as the runtime's do
	id := p.jobs
	if err := p.send(stageproto.Check{Type: stageproto.TypeCheck, ID: id, Params: params}, nil); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(external.CheckTimeout)
	for {
		m, err := p.next(ctx, time.Until(deadline))
		switch {
		case errors.Is(err, errWait):
			return nil, fmt.Errorf("no answer to a check of %s within %s", params, external.CheckTimeout)
		case err != nil:
			return nil, fmt.Errorf("checking %s: %w", params, err)
		case m.h.Type == stageproto.TypeError && m.h.Job == 0:
			return nil, fmt.Errorf("checking %s, it failed (an error of no job, which loses its replica): %s", params, m.h.Message)
		case m.h.Type == stageproto.TypeChecked && m.h.ID == id:
			return m.h.Fault, nil
		}
	}
}
