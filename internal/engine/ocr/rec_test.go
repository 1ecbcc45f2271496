package ocr

import (
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/ppocr"
)

// TestRecOptions: ppocr-rec reads the spaces the model scored but did not
// write unless space_score is 0, and refuses settings out of range.
func TestRecOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options engine.Options
		want    ppocr.RecOptions
		wantErr bool
	}{
		{"defaults", nil, ppocr.RecOptions{DropScore: 0.5, SpaceScore: ppocr.GapSpaceScore}, false},
		{"spaces off", engine.Options{"space_score": 0}, ppocr.RecOptions{DropScore: 0.5}, false},
		{"both set", engine.Options{"drop_score": 0.3, "space_score": 0.1}, ppocr.RecOptions{DropScore: 0.3, SpaceScore: 0.1}, false},
		{"drop_score over 1", engine.Options{"drop_score": 1.5}, ppocr.RecOptions{}, true},
		{"negative space_score", engine.Options{"space_score": -0.01}, ppocr.RecOptions{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := decodeRec(tc.options)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v; want one: %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("%+v; want %+v", got, tc.want)
			}
		})
	}
}

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
