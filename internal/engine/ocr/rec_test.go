package ocr

import (
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestRecRuns: a batch's crops run by input width, in the order the
// widths first come, each width's crops in their order, two at a time up
// to 640 wide, alone when wider.
func TestRecRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		widths []int
		want   [][]int // item indexes of each run
	}{
		{"none", nil, nil},
		{"one", []int{320}, [][]int{{0}}},
		{"narrow ones two at a time", []int{320, 320, 320, 320, 320}, [][]int{{0, 1}, {2, 3}, {4}}},
		{"up to 640 two at a time", []int{640, 640, 640}, [][]int{{0, 1}, {2}}},
		{"wider ones alone", []int{704, 704, 1920}, [][]int{{0}, {1}, {2}}},
		{"widths apart, first come first", []int{640, 320, 640, 384, 320, 640, 768}, [][]int{{0, 2}, {5}, {1, 4}, {3}, {6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := make([]*engine.BatchItem, len(tc.widths))
			for i, w := range tc.widths {
				items[i] = &engine.BatchItem{Size: w, Input: i}
			}
			var got [][]int
			for _, run := range recRuns(items) {
				var idx []int
				for _, it := range run {
					idx = append(idx, it.Input.(int))
				}
				got = append(got, idx)
			}
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("runs %v, want %v", got, tc.want)
			}
		})
	}
}
