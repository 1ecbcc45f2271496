package external

// Checking a request's params: the names the program's hello declares,
// then the program's own check.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/stageproto"
)

// paramNames returns the names of hello's params, sorted; nil when hello
// declares none.
func paramNames(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]stageproto.ParamInfo
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("the program's hello: params must be an object of param names to descriptions: %v", err)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names, nil
}

// CheckParams implements engine.ParamsChecker: params must be an object of
// the params the program's hello declares (when it declares any), which
// the program then checks itself.
func (e *Engine) CheckParams(params json.RawMessage) error {
	params = bytes.TrimSpace(params)
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(params, &fields); err != nil {
		return &engine.ParamError{Reason: "want an object of params"}
	}
	if e.params != nil {
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			if !slices.Contains(e.params, k) {
				return engine.UnknownParam(k, e.params)
			}
		}
	}
	return e.check(params)
}

// check asks the program to check params and waits for its answer.
func (e *Engine) check(params json.RawMessage) error {
	id := e.nextID.Add(1)
	answer := make(chan *stageproto.Header, 1)
	e.mu.Lock()
	e.checks[id] = answer
	e.mu.Unlock()
	forget := func() {
		e.mu.Lock()
		delete(e.checks, id)
		e.mu.Unlock()
	}
	if err := e.w.Write(stageproto.Check{Type: stageproto.TypeCheck, ID: id, Params: params}, nil); err != nil {
		forget()
		return e.writeError(err)
	}
	t := time.NewTimer(CheckTimeout)
	defer t.Stop()
	select {
	case h := <-answer:
		if f := h.Fault; f != nil {
			return &engine.ParamError{Field: f.Field, Reason: f.Reason}
		}
		return nil
	case <-t.C:
		forget()
		return fmt.Errorf("%s: stage %d (%s): the program did not answer a check of params within %s", Name, e.spec.StageID, e.spec.Name, CheckTimeout)
	case <-e.Lost():
		forget()
		return e.Loss.Err()
	}
}
