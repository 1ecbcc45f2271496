package pipeline

// The resolved route: stage order, positions and peers, and the selection
// of what one request runs.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// Route is the resolved, validated chain of stages: the only source of stage
// order at run time. The aligner, when declared, is the chain's last element
// with id NumStages.
type Route struct {
	chain    []int // stage ids in route order, the aligner last
	pos      []int // position in chain by stage id, -1 for a skipped stage
	aligner  int   // aligner id, or -1
	explicit bool
	output   []engine.Kind // output kind by stage id, the aligner included
	final    []bool        // final_output by stage id, the aligner included
	names    []string

	// The selections most requests make, made once: no modalities, and
	// each route stage alone.
	defaultSel *Selection
	onlySel    []*Selection // by stage id; nil for a skipped stage
}

// Order returns the route's pipeline stages in order, without the aligner.
func (r *Route) Order() []int {
	if r.aligner >= 0 {
		return slices.Clone(r.chain[:len(r.chain)-1])
	}
	return slices.Clone(r.chain)
}

// Chain returns the full chain of stage ids, the aligner included.
func (r *Route) Chain() []int { return slices.Clone(r.chain) }

// Tail returns the last pipeline stage on the route (before the aligner).
func (r *Route) Tail() int {
	if r.aligner >= 0 {
		return r.chain[len(r.chain)-2]
	}
	return r.chain[len(r.chain)-1]
}

// Output returns the kind stage id outputs.
func (r *Route) Output(id int) engine.Kind { return r.output[id] }

// Aligner returns the aligner's stage id.
func (r *Route) Aligner() (int, bool) { return r.aligner, r.aligner >= 0 }

// NumIDs returns the number of stage ids, the aligner included: the length
// of a full sampling_params array.
func (r *Route) NumIDs() int { return len(r.pos) }

// Skipped returns the declared stages that are not on the route, in id order.
func (r *Route) Skipped() []int {
	var s []int
	for id, p := range r.pos {
		if p < 0 {
			s = append(s, id)
		}
	}
	return s
}

// OnRoute reports whether stage id is on the route.
func (r *Route) OnRoute(id int) bool { return id >= 0 && id < len(r.pos) && r.pos[id] >= 0 }

// Upstream returns the stage that feeds id on the route.
func (r *Route) Upstream(id int) (int, bool) {
	if !r.OnRoute(id) || r.pos[id] == 0 {
		return -1, false
	}
	return r.chain[r.pos[id]-1], true
}

// Downstream returns the stage that id feeds on the route.
func (r *Route) Downstream(id int) (int, bool) {
	if !r.OnRoute(id) || r.pos[id] == len(r.chain)-1 {
		return -1, false
	}
	return r.chain[r.pos[id]+1], true
}

// Transitions returns the effective transitions: nil when the pipeline
// omitted them, otherwise the chain's edges, the aligner's included.
func (r *Route) Transitions() [][2]int {
	if !r.explicit {
		return nil
	}
	edges := make([][2]int, 0, len(r.chain))
	for i := 1; i < len(r.chain); i++ {
		edges = append(edges, [2]int{r.chain[i-1], r.chain[i]})
	}
	return edges
}

// Prefix returns the chain up to and including final.
func (r *Route) Prefix(final int) []int {
	if !r.OnRoute(final) {
		return nil
	}
	return slices.Clone(r.chain[:r.pos[final]+1])
}

// String renders the chain as "0 -> 2 -> 1".
func (r *Route) String() string { return chainString(r.chain) }

// Selected is one output a request selected: the stage that produces it,
// and its kind.
type Selected struct {
	Stage int
	Kind  engine.Kind
}

// Selection is what one request runs: the chain prefix up to the final stage
// and the outputs it returns, in route order (the last is the terminal one).
type Selection struct {
	Final   int
	Stages  []int
	Outputs []Selected
	// NeedParams is the shortest sampling_params array this request accepts.
	NeedParams int
	numIDs     int
}

// SelectError is a request whose outputs or params the route cannot serve:
// the caller's fault.
type SelectError struct{ Msg string }

func (e *SelectError) Error() string { return e.Msg }

// Select resolves a request's output modalities. No modalities means the
// type of the route's tail (without the aligner). A list is first checked
// on its own (CheckModalities); then each modality is served by the last
// route stage whose final output has that type (text also by regions: a
// stage's regions serve both), and the final stage is the latest of
// those. Selections may be shared between requests: callers must
// not modify them.
func (r *Route) Select(modalities []string) (*Selection, error) {
	if len(modalities) == 0 && r.defaultSel != nil {
		return r.defaultSel, nil
	}
	if err := CheckModalities(modalities); err != nil {
		return nil, err
	}
	return r.selectNew(modalities)
}

// selectNew resolves modalities that passed CheckModalities, or none.
func (r *Route) selectNew(modalities []string) (*Selection, error) {
	if len(modalities) == 0 {
		modalities = []string{string(r.output[r.Tail()])}
	}
	var outs []Selected
	for _, m := range modalities {
		k := engine.Kind(m)
		best := -1
		for _, id := range r.chain {
			if r.final[id] && slices.Contains(servedBy(k), r.output[id]) {
				best = id
			}
		}
		if best < 0 {
			return nil, r.unservable(k)
		}
		outs = append(outs, Selected{Stage: best, Kind: k})
	}
	slices.SortFunc(outs, func(a, b Selected) int { return r.pos[a.Stage] - r.pos[b.Stage] })
	final := outs[len(outs)-1].Stage
	need := 0
	for _, id := range r.chain[:r.pos[final]+1] {
		need = max(need, id+1)
	}
	return &Selection{Final: final, Stages: r.Prefix(final), Outputs: outs, NeedParams: need, numIDs: len(r.pos)}, nil
}

// Only returns the selection that runs stage id alone and returns its
// output: one /v1/run call.
func (r *Route) Only(id int) (*Selection, error) {
	if !r.OnRoute(id) {
		return nil, &SelectError{Msg: fmt.Sprintf("stage %d is not on the route (%s)", id, r)}
	}
	return r.onlySel[id], nil
}

// Upstream returns the stage before id on the selection's prefix: the one
// that feeds it in this request.
func (s *Selection) Upstream(id int) (int, bool) {
	for i, x := range s.Stages {
		if x == id && i > 0 {
			return s.Stages[i-1], true
		}
	}
	return -1, false
}

// Modalities returns the modalities the selection gets from stage id's
// output (none when it selects nothing of it; two for a stage whose
// regions serve text too).
func (s *Selection) Modalities(id int) []engine.Kind {
	var ks []engine.Kind
	for _, o := range s.Outputs {
		if o.Stage == id {
			ks = append(ks, o.Kind)
		}
	}
	return ks
}

// Next returns the stage after id on the selection's prefix.
func (s *Selection) Next(id int) (int, bool) {
	for i, x := range s.Stages {
		if x == id && i+1 < len(s.Stages) {
			return s.Stages[i+1], true
		}
	}
	return -1, false
}

func (r *Route) unservable(k engine.Kind) error {
	var skipped []string
	for id, p := range r.pos {
		if p < 0 && r.final[id] && slices.Contains(servedBy(k), r.output[id]) {
			skipped = append(skipped, fmt.Sprintf("stage %d (%s)", id, r.names[id]))
		}
	}
	if len(skipped) > 0 {
		return &SelectError{Msg: fmt.Sprintf("output %q is produced only by %s, which the route skips", k, strings.Join(skipped, " and "))}
	}
	return &SelectError{Msg: fmt.Sprintf("no stage on the route produces output %q", k)}
}

// Outputs returns the output modalities a request may select on the
// route (audio, timestamps, text), in the order of Selectable.
func (r *Route) Outputs() []string {
	outs := []string{}
	for _, k := range Selectable {
		if r.Produces(k) {
			outs = append(outs, string(k))
		}
	}
	return outs
}

// Produces reports whether a request may select output k on the route.
func (r *Route) Produces(k engine.Kind) bool {
	_, err := r.Select([]string{string(k)})
	return err == nil
}

// Returns reports whether the selection returns stage id's output.
func (s *Selection) Returns(id int) bool {
	return slices.ContainsFunc(s.Outputs, func(o Selected) bool { return o.Stage == id })
}

func chainString(chain []int) string {
	if len(chain) == 0 {
		return "empty"
	}
	parts := make([]string, len(chain))
	for i, id := range chain {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, " -> ")
}
