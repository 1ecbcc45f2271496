package pipeline

import (
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// checkRouteInvariants checks, independently of the resolver, that a
// resolved route obeys every route rule.
func checkRouteInvariants(t testing.TB, c *Config) {
	t.Helper()
	p, r := &c.Pipeline, c.Route
	if r == nil {
		t.Fatal("valid config without a route")
	}
	n := len(p.Stages)
	chain := r.Chain()
	if len(chain) == 0 || chain[0] != 0 {
		t.Fatalf("route %v does not start at stage 0", chain)
	}
	seen := map[int]bool{}
	for i, id := range chain {
		if seen[id] {
			t.Fatalf("route %v visits %d twice", chain, id)
		}
		seen[id] = true
		if id < 0 || id > n || (id == n && (p.Aligner == nil || i != len(chain)-1)) {
			t.Fatalf("route %v has bad id %d", chain, id)
		}
	}
	kindOut := func(id int) engine.Kind {
		if id == n {
			return engine.KindTimestamps
		}
		return p.Stages[id].Output
	}
	kindIn := func(id int) engine.Kind {
		if id == n {
			return engine.KindAudio
		}
		return p.Stages[id].Input
	}
	if kindIn(0) != p.Input {
		t.Fatalf("stage 0 takes %s, pipeline input %s", kindIn(0), p.Input)
	}
	for i := 1; i < len(chain); i++ {
		if kindOut(chain[i-1]) != kindIn(chain[i]) {
			t.Fatalf("edge %d->%d kinds %s->%s", chain[i-1], chain[i], kindOut(chain[i-1]), kindIn(chain[i]))
		}
	}
	tail := r.Tail()
	if !p.Stages[tail].FinalOutput {
		t.Fatalf("tail %d not final", tail)
	}
	if p.Aligner != nil {
		if chain[len(chain)-1] != n || chain[len(chain)-2] != tail {
			t.Fatalf("aligner not after the tail: %v", chain)
		}
	}
	if p.Transitions == nil {
		for i, id := range r.Order() {
			if id != i {
				t.Fatalf("omitted transitions but route %v is not id order", chain)
			}
		}
	} else {
		// Every explicit edge is on the chain, and the chain has no other edges.
		pos := map[int]int{}
		for i, id := range chain {
			pos[id] = i
		}
		for _, e := range p.Transitions {
			pf, okf := pos[e[0]]
			pt, okt := pos[e[1]]
			if !okf || !okt || pt != pf+1 {
				t.Fatalf("edge %v not on route %v", e, chain)
			}
		}
		if len(r.Order())-1 != len(p.Transitions) {
			t.Fatalf("route %v has edges not in transitions %v", chain, p.Transitions)
		}
	}
	if len(c.Deploy.Stages) != r.NumIDs() {
		t.Fatalf("deploy has %d stages, want %d", len(c.Deploy.Stages), r.NumIDs())
	}
}
