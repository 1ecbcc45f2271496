package pipeline

// A request's outputs and sampling params, checked against the route before
// anything runs.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// Selectable are the kinds a request may name in output_modalities: those
// an answer carries. The other kinds (frames, segments, tensor, image)
// pass only between stages.
var Selectable = []engine.Kind{engine.KindAudio, engine.KindTimestamps, engine.KindText, engine.KindRegions}

// servedBy lists the output kinds of a stage that serve modality k: its
// own kind, and for text also regions, whose texts read in order are the
// text of the image they were found in (engine.RegionsText).
func servedBy(k engine.Kind) []engine.Kind {
	if k == engine.KindText {
		return []engine.Kind{engine.KindText, engine.KindRegions}
	}
	return []engine.Kind{k}
}

// CheckModalities checks a request's output_modalities list on its own,
// before any route is consulted. It is the one check of such a list on
// every path that takes one: Route.Select (POST /v1/generate, the entry of
// POST /v1/run, the orchestrator) and the validation of a payload's
// envelope. Each entry must be a Selectable kind, and none may come twice.
// The error is a *SelectError naming the first bad entry by its index; a
// list of any length is refused at its first repeat, after at most
// len(Selectable) entries.
func CheckModalities(mods []string) error {
	for i, m := range mods {
		k := engine.Kind(m)
		switch {
		case !k.Valid():
			return &SelectError{Msg: fmt.Sprintf("output_modalities[%d]: unknown output modality %q (select %s)", i, m, selectableList())}
		case !slices.Contains(Selectable, k):
			return &SelectError{Msg: fmt.Sprintf("output_modalities[%d]: %q is an intermediate kind, passed between stages and never returned (select %s)", i, m, selectableList())}
		}
		if j := slices.Index(mods[:i], m); j >= 0 {
			return &SelectError{Msg: fmt.Sprintf("output_modalities[%d]: %q is already output_modalities[%d]; name each output once", i, m, j)}
		}
	}
	return nil
}

func selectableList() string {
	names := make([]string, len(Selectable))
	for i, k := range Selectable {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// ParamsCheck is a stage engine's own check of its entry of a
// sampling_params array (engine.ParamsChecker), given the stage id; it
// returns nil for a stage it cannot check.
type ParamsCheck func(id int, params json.RawMessage) error

// CheckParams checks each entry of a sampling_params array (indexed by
// stage id) on its own, in stage id order: it must be a JSON object or
// null (absent entries are null), and then pass check (when check is not
// nil). Every entry given is checked: the entries of stages the route skips
// and of stages a request does not run (an audio-only request's aligner)
// too, so that a mistake is reported whether or not its stage would have
// run. The error is a *SelectError for an entry that is not an object, or
// check's error.
func CheckParams(params []json.RawMessage, check ParamsCheck) error {
	for id, p := range params {
		p = bytes.TrimSpace(p)
		if len(p) == 0 || string(p) == "null" {
			continue
		}
		if p[0] != '{' || !json.Valid(p) {
			return &SelectError{Msg: fmt.Sprintf("sampling_params[%d] is not a JSON object or null (it holds the params of stage %d)", id, id)}
		}
		if check != nil {
			if err := check(id, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckParams checks a request's sampling_params array for this selection,
// most specific problem first: each entry's value (the package function
// CheckParams, with check), then the array's length, which must cover
// every stage the request runs and no more than the pipeline's stage ids.
// The values come first because a person fixes the value they wrote
// before the nulls they left out: [{"voice": "bogus"}] on a route of two
// stages is refused for its voice, and once that is fixed, for its length.
// An absent array means defaults everywhere.
func (s *Selection) CheckParams(params []json.RawMessage, check ParamsCheck) error {
	if err := CheckParams(params, check); err != nil {
		return err
	}
	n := len(params)
	if n == 0 {
		return nil
	}
	if n < s.NeedParams {
		return &SelectError{Msg: fmt.Sprintf("sampling_params has %d entries but this request runs stage %d: it needs at least %d (one per stage id, null for defaults)", n, s.NeedParams-1, s.NeedParams)}
	}
	if n > s.numIDs {
		return &SelectError{Msg: fmt.Sprintf("sampling_params has %d entries but the pipeline has only %d stage ids", n, s.numIDs)}
	}
	return nil
}
