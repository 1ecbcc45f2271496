package onnxstage

import (
	"fmt"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestGroups splits batches into runs: items of one shape past dimension
// 0 share a run, in order of their first items; an item whose inputs
// disagree on dimension 0, or any item of a model that does not stack,
// runs alone.
func TestGroups(t *testing.T) {
	item := func(rows int64, width ...int64) *engine.BatchItem {
		u := &unit{}
		for _, w := range width {
			shape := []int64{rows, w}
			u.in = append(u.in, engine.Tensor{Name: "x", Type: engine.Float32, Shape: shape, Data: make([]byte, 4*rows*w)})
		}
		u.rows, u.key = rows, fmt.Sprint(width)
		if len(width) > 1 && width[0] != width[1] {
			u.rows = -1 // as if the inputs' dimension 0 differed
		}
		return &engine.BatchItem{Input: u}
	}
	a1, a2, a3 := item(1, 192), item(2, 192), item(1, 192)
	b1, b2 := item(1, 96), item(3, 96)
	c1, c2 := item(1, 8, 8), item(1, 8, 9)
	tests := []struct {
		name   string
		stacks bool
		items  []*engine.BatchItem
		want   [][]*engine.BatchItem
	}{
		{"one shape", true, []*engine.BatchItem{a1, a2, a3}, [][]*engine.BatchItem{{a1, a2, a3}}},
		{"two shapes", true, []*engine.BatchItem{b1, a1, a2, b2, a3}, [][]*engine.BatchItem{{b1, b2}, {a1, a2, a3}}},
		{"rows disagree", true, []*engine.BatchItem{c1, c2, a1}, [][]*engine.BatchItem{{c1}, {c2}, {a1}}},
		{"no stacking", false, []*engine.BatchItem{a1, a2}, [][]*engine.BatchItem{{a1}, {a2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Engine{stacks: tt.stacks}
			got := e.groups(tt.items)
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("groups = %v; want %v", got, tt.want)
			}
		})
	}
}
