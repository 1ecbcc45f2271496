package pipeline

// Route resolution: from a pipeline's stages and transitions to its Route,
// reporting every route rule the pipeline breaks.

import (
	"fmt"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// transitionsPath is the field path of the explicit transitions.
const transitionsPath = "pipeline.stage_transitions"

// resolver holds what the steps of resolveRoute share: the pipeline, whose
// stages passed their own checks, and the errors found.
type resolver struct {
	p    *Pipeline
	n    int // declared stages
	errs *errList
}

// resolveRoute builds the route of a pipeline whose stages passed their own
// checks, reporting every route rule it breaks: the chain (id order, or
// the explicit transitions), the kinds along every declared edge, the
// route's tail and the aligner. It returns nil when there is no route.
func resolveRoute(p *Pipeline, errs *errList) *Route {
	v := &resolver{p: p, n: len(p.Stages), errs: errs}
	var chain []int
	if p.Transitions == nil {
		for id := range v.n {
			chain = append(chain, id)
		}
	} else {
		chain = v.chainFromTransitions()
	}
	v.checkKinds()
	if chain == nil {
		return nil
	}
	aligner := v.checkTail(chain)
	if aligner >= 0 {
		chain = append(chain, aligner)
	}
	return newRoute(p, chain, aligner)
}

func (v *resolver) stageDesc(id int) string {
	return fmt.Sprintf("stage %d (%s)", id, v.p.Stages[id].Name)
}

// edgeLine is the line of transition i, 0 when unknown.
func (v *resolver) edgeLine(i int) int {
	if i < len(v.p.transitionLines) {
		return v.p.transitionLines[i]
	}
	return 0
}

// edge is an accepted transition, at index at of stage_transitions.
type edge struct{ from, to, at int }

// transitions is what the per-edge checks make of the explicit
// transitions.
type transitions struct {
	succ        []int          // successor by stage id along accepted edges, -1 for none
	valid       []edge         // the accepted edges, in declaration order
	at          map[[2]int]int // the index of each distinct well-formed edge
	undecodable bool           // an edge could not be decoded (already reported)
}

// chainFromTransitions returns the chain the explicit transitions give,
// from stage 0; nil when any of them breaks a rule: checked each on its
// own, then for cycles, then for reachability.
func (v *resolver) chainFromTransitions() []int {
	before := len(v.errs.errs)
	t := v.checkTransitions()
	inCycle := v.checkCycles(t)
	chain := v.follow(t, inCycle)
	if len(v.errs.errs) > before || t.undecodable {
		return nil
	}
	return chain
}

// checkTransitions checks each transition on its own and keeps those that
// may join a route.
func (v *resolver) checkTransitions() *transitions {
	t := &transitions{succ: make([]int, v.n), at: map[[2]int]int{}}
	pred := make([]int, v.n)
	for i := range v.n {
		t.succ[i], pred[i] = -1, -1
	}
	for i, e := range v.p.Transitions {
		if e[0] == noID || e[1] == noID {
			t.undecodable = true // already reported while decoding
			continue
		}
		if v.acceptEdge(i, e, t, pred) {
			t.succ[e[0]], pred[e[1]] = e[1], e[0]
			t.valid = append(t.valid, edge{e[0], e[1], i})
		}
	}
	return t
}

// acceptEdge reports whether transition i, e, may join the route given the
// edges accepted before it (t, and pred: the predecessor of each stage),
// reporting why not: an unknown stage, a stage to itself, a duplicate, a
// branch or a join.
func (v *resolver) acceptEdge(i int, e [2]int, t *transitions, pred []int) bool {
	path, line := index(transitionsPath, i), v.edgeLine(i)
	bad := false
	for _, id := range e {
		if id < 0 || id >= v.n {
			v.errs.add(line, path, "unknown stage %d in transition [%d, %d] (stage ids are 0..%d)", id, e[0], e[1], v.n-1)
			bad = true
		}
	}
	if bad {
		return false
	}
	if e[0] == e[1] {
		v.errs.add(line, path, "%s transitions to itself", v.stageDesc(e[0]))
		return false
	}
	if j, dup := t.at[e]; dup {
		v.errs.add(line, path, "duplicate transition [%d, %d] (also at %s)", e[0], e[1], index(transitionsPath, j))
		return false
	}
	t.at[e] = i
	if t.succ[e[0]] >= 0 {
		v.errs.add(line, path, "%s has two successors, %d and %d: a route cannot branch", v.stageDesc(e[0]), t.succ[e[0]], e[1])
		return false
	}
	if pred[e[1]] >= 0 {
		v.errs.add(line, path, "%s has two predecessors, %d and %d: a route cannot join", v.stageDesc(e[1]), pred[e[1]], e[0])
		return false
	}
	return true
}

// checkCycles reports each cycle of the accepted edges and returns the
// stages in one. With at most one successor and predecessor per stage,
// the edges form paths and cycles; a cycle's stages all have a
// predecessor.
func (v *resolver) checkCycles(t *transitions) []bool {
	inCycle := make([]bool, v.n)
	for start := range v.n {
		if inCycle[start] || t.succ[start] < 0 {
			continue
		}
		cyc := []int{start}
		for id := t.succ[start]; id >= 0 && id != start && len(cyc) <= v.n; id = t.succ[id] {
			cyc = append(cyc, id)
		}
		if len(cyc) > v.n || t.succ[cyc[len(cyc)-1]] != start {
			continue
		}
		for _, id := range cyc {
			inCycle[id] = true
		}
		parts := make([]string, 0, len(cyc)+1)
		for _, id := range append(cyc, start) {
			parts = append(parts, fmt.Sprint(id))
		}
		closing := t.at[[2]int{cyc[len(cyc)-1], start}]
		v.errs.add(v.edgeLine(closing), transitionsPath, "cycle %s: a route cannot return to a stage", strings.Join(parts, " -> "))
	}
	return inCycle
}

// follow returns the chain from stage 0 along the accepted edges (nil when
// stage 0 is in a cycle), and reports each accepted edge outside a cycle
// that it does not reach.
func (v *resolver) follow(t *transitions, inCycle []bool) []int {
	var chain []int
	reach := make([]bool, v.n)
	if !inCycle[0] {
		chain = []int{0}
		reach[0] = true
		for id := t.succ[0]; id >= 0; id = t.succ[id] {
			chain = append(chain, id)
			reach[id] = true
		}
	}
	for _, e := range t.valid {
		if !reach[e.from] && !inCycle[e.from] {
			v.errs.add(v.edgeLine(e.at), index(transitionsPath, e.at), "transition [%d, %d] is unreachable from stage 0 (the route is %s)", e.from, e.to, chainString(chain))
		}
	}
	return chain
}

// checkKinds checks the kinds along every declared edge, whether or not
// the route resolved, and the entry stage's input against the pipeline's.
func (v *resolver) checkKinds() {
	p := v.p
	if p.Transitions == nil {
		for id := 1; id < v.n; id++ {
			v.checkEdgeKinds(p.Stages[id].line, index("pipeline.stages", id)+".input", id-1, id)
		}
	} else {
		for i, e := range p.Transitions {
			if e[0] >= 0 && e[0] < v.n && e[1] >= 0 && e[1] < v.n && e[0] != e[1] {
				v.checkEdgeKinds(v.edgeLine(i), index(transitionsPath, i), e[0], e[1])
			}
		}
	}
	if s0 := p.Stages[0]; p.Input != "" && s0.Input != "" && s0.Input != p.Input {
		v.errs.add(s0.line, "pipeline.stages[0].input", "%s takes %s but the pipeline input is %s", v.stageDesc(0), s0.Input, p.Input)
	}
}

// checkEdgeKinds reports an edge whose stages disagree on the kind between
// them.
func (v *resolver) checkEdgeKinds(line int, path string, from, to int) {
	a, b := v.p.Stages[from], v.p.Stages[to]
	if a.Output != "" && b.Input != "" && a.Output != b.Input {
		v.errs.add(line, path, "%s outputs %s but %s takes %s", v.stageDesc(from), a.Output, v.stageDesc(to), b.Input)
	}
}

// checkTail checks the stage that ends chain: it must be a final output,
// and produce audio when an aligner follows. It returns the aligner's id
// (the number of declared stages), or -1 without one.
func (v *resolver) checkTail(chain []int) int {
	p := v.p
	tail := chain[len(chain)-1]
	if !p.Stages[tail].FinalOutput {
		v.errs.add(p.Stages[tail].line, index("pipeline.stages", tail)+".final_output", "%s ends the route (%s) but is not marked final_output: true", v.stageDesc(tail), chainString(chain))
	}
	if p.Aligner == nil {
		return -1
	}
	if out := p.Stages[tail].Output; out != "" && out != engine.KindAudio {
		v.errs.add(p.Aligner.line, "pipeline.aligner", "the aligner needs an audio-producing tail, but the route ends at %s, which outputs %s", v.stageDesc(tail), out)
	}
	return v.n
}

// newRoute builds the Route of p along chain (the aligner last, when
// aligner is not -1), with the selections made once.
func newRoute(p *Pipeline, chain []int, aligner int) *Route {
	total := len(p.Stages)
	if aligner >= 0 {
		total++
	}
	r := &Route{
		chain: chain, aligner: aligner, explicit: p.Transitions != nil,
		pos: make([]int, total), output: make([]engine.Kind, total), final: make([]bool, total), names: make([]string, total),
	}
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
