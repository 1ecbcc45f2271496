package pipeline

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
// route stage whose final output has that type, and the final stage is the
// latest of those. Selections may be shared between requests: callers must
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
			if r.final[id] && r.output[id] == k {
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
		if p < 0 && r.final[id] && r.output[id] == k {
			skipped = append(skipped, fmt.Sprintf("stage %d (%s)", id, r.names[id]))
		}
	}
	if len(skipped) > 0 {
		return &SelectError{Msg: fmt.Sprintf("output %q is produced only by %s, which the route skips", k, strings.Join(skipped, " and "))}
	}
	return &SelectError{Msg: fmt.Sprintf("no stage on the route produces output %q", k)}
}

// Returns reports whether the selection returns stage id's output.
func (s *Selection) Returns(id int) bool {
	return slices.ContainsFunc(s.Outputs, func(o Selected) bool { return o.Stage == id })
}

// resolveRoute builds the route of a pipeline whose stages passed their own
// checks, reporting every route rule it breaks.
func resolveRoute(p *Pipeline, errs *errList) *Route {
	n := len(p.Stages)
	stageDesc := func(id int) string { return fmt.Sprintf("stage %d (%s)", id, p.Stages[id].Name) }
	const tpath = "pipeline.stage_transitions"
	edgeLine := func(i int) int {
		if i < len(p.transitionLines) {
			return p.transitionLines[i]
		}
		return 0
	}

	var chain []int
	if p.Transitions == nil {
		for id := range n {
			chain = append(chain, id)
		}
	} else {
		succ := make([]int, n)
		pred := make([]int, n)
		for i := range n {
			succ[i], pred[i] = -1, -1
		}
		type edge struct{ from, to, at int }
		var valid []edge
		seen := map[[2]int]int{}
		before := len(errs.errs)
		undecodable := false
		for i, e := range p.Transitions {
			path, line := index(tpath, i), edgeLine(i)
			if e[0] == noID || e[1] == noID {
				undecodable = true // already reported while decoding
				continue
			}
			bad := false
			for _, id := range e {
				if id < 0 || id >= n {
					errs.add(line, path, "unknown stage %d in transition [%d, %d] (stage ids are 0..%d)", id, e[0], e[1], n-1)
					bad = true
				}
			}
			if bad {
				continue
			}
			if e[0] == e[1] {
				errs.add(line, path, "%s transitions to itself", stageDesc(e[0]))
				continue
			}
			if j, dup := seen[e]; dup {
				errs.add(line, path, "duplicate transition [%d, %d] (also at %s)", e[0], e[1], index(tpath, j))
				continue
			}
			seen[e] = i
			if succ[e[0]] >= 0 {
				errs.add(line, path, "%s has two successors, %d and %d: a route cannot branch", stageDesc(e[0]), succ[e[0]], e[1])
				continue
			}
			if pred[e[1]] >= 0 {
				errs.add(line, path, "%s has two predecessors, %d and %d: a route cannot join", stageDesc(e[1]), pred[e[1]], e[0])
				continue
			}
			succ[e[0]], pred[e[1]] = e[1], e[0]
			valid = append(valid, edge{e[0], e[1], i})
		}
		// With at most one successor and predecessor per stage, the edges form
		// paths and cycles; a cycle's stages all have a predecessor.
		inCycle := make([]bool, n)
		for start := range n {
			if inCycle[start] || succ[start] < 0 {
				continue
			}
			cyc := []int{start}
			for id := succ[start]; id >= 0 && id != start && len(cyc) <= n; id = succ[id] {
				cyc = append(cyc, id)
			}
			if len(cyc) <= n && succ[cyc[len(cyc)-1]] == start {
				for _, id := range cyc {
					inCycle[id] = true
				}
				parts := make([]string, 0, len(cyc)+1)
				for _, id := range append(cyc, start) {
					parts = append(parts, fmt.Sprint(id))
				}
				errs.add(edgeLine(seen[[2]int{cyc[len(cyc)-1], start}]), tpath, "cycle %s: a route cannot return to a stage", strings.Join(parts, " -> "))
			}
		}
		reach := make([]bool, n)
		if !inCycle[0] {
			chain = []int{0}
			reach[0] = true
			for id := succ[0]; id >= 0; id = succ[id] {
				chain = append(chain, id)
				reach[id] = true
			}
		}
		for _, e := range valid {
			if !reach[e.from] && !inCycle[e.from] {
				errs.add(edgeLine(e.at), index(tpath, e.at), "transition [%d, %d] is unreachable from stage 0 (the route is %s)", e.from, e.to, chainString(chain))
			}
		}
		if len(errs.errs) > before || undecodable {
			chain = nil
		}
	}

	// Kinds along every declared edge, whether or not the route resolved.
	checkEdge := func(line int, path string, from, to int) {
		a, b := p.Stages[from], p.Stages[to]
		if a.Output != "" && b.Input != "" && a.Output != b.Input {
			errs.add(line, path, "%s outputs %s but %s takes %s", stageDesc(from), a.Output, stageDesc(to), b.Input)
		}
	}
	if p.Transitions == nil {
		for id := 1; id < n; id++ {
			checkEdge(p.Stages[id].line, index("pipeline.stages", id)+".input", id-1, id)
		}
	} else {
		for i, e := range p.Transitions {
			if e[0] >= 0 && e[0] < n && e[1] >= 0 && e[1] < n && e[0] != e[1] {
				checkEdge(edgeLine(i), index(tpath, i), e[0], e[1])
			}
		}
	}
	if s0 := p.Stages[0]; p.Input != "" && s0.Input != "" && s0.Input != p.Input {
		errs.add(s0.line, "pipeline.stages[0].input", "%s takes %s but the pipeline input is %s", stageDesc(0), s0.Input, p.Input)
	}
	if chain == nil {
		return nil
	}
	tail := chain[len(chain)-1]
	if !p.Stages[tail].FinalOutput {
		errs.add(p.Stages[tail].line, index("pipeline.stages", tail)+".final_output", "%s ends the route (%s) but is not marked final_output: true", stageDesc(tail), chainString(chain))
	}
	aligner := -1
	if p.Aligner != nil {
		aligner = n
		if out := p.Stages[tail].Output; out != "" && out != engine.KindAudio {
			errs.add(p.Aligner.line, "pipeline.aligner", "the aligner needs an audio-producing tail, but the route ends at %s, which outputs %s", stageDesc(tail), out)
		}
		chain = append(chain, aligner)
	}

	r := &Route{chain: chain, aligner: aligner, explicit: p.Transitions != nil}
	total := n
	if aligner >= 0 {
		total++
	}
	r.pos = make([]int, total)
	r.output = make([]engine.Kind, total)
	r.final = make([]bool, total)
	r.names = make([]string, total)
	for i := range r.pos {
		r.pos[i] = -1
	}
	for i, id := range chain {
		r.pos[id] = i
	}
	for id, s := range p.Stages {
		r.output[id], r.final[id], r.names[id] = s.Output, s.FinalOutput, s.Name
	}
	if aligner >= 0 {
		r.output[aligner], r.final[aligner], r.names[aligner] = engine.KindTimestamps, true, p.Aligner.Name
	}
	if len(chain) > 0 {
		r.defaultSel, _ = r.selectNew(nil)
		r.onlySel = make([]*Selection, len(r.pos))
		for _, id := range chain {
			r.onlySel[id] = &Selection{Final: id, Stages: []int{id}, Outputs: []Selected{{Stage: id, Kind: r.output[id]}}, NeedParams: id + 1, numIDs: len(r.pos)}
		}
	}
	return r
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
