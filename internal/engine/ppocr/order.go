package ppocr

// Putting boxes in reading order and their corners clockwise.

import (
	"cmp"
	"math"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
)

// lineSlack is how far apart, in image pixels, two boxes' top-left
// corners may be vertically for the boxes to count as one line
// (PaddleOCR's sorted_boxes).
const lineSlack = 10

// Detect turns the detector's w×h probability map for an imgW×imgH image
// into the image's text boxes in reading order: DB post-processing, then
// each box's corners put clockwise from the top-left and clipped to the
// image, boxes 3 pixels or less across dropped (PaddleOCR's
// filter_tag_det_res), and the rest sorted top to bottom, left to right
// within a line.
func (o DBOptions) Detect(prob []float32, w, h, imgW, imgH int) ([]Box, error) {
	boxes, err := o.Boxes(prob, w, h, imgW, imgH)
	if err != nil {
		return nil, err
	}
	kept := boxes[:0]
	for _, b := range boxes {
		b.Quad = clockwise(b.Quad)
		for i, p := range b.Quad {
			b.Quad[i] = engine.Point{
				X: float32(math.Trunc(float64(min(max(p.X, 0), float32(imgW-1))))),
				Y: float32(math.Trunc(float64(min(max(p.Y, 0), float32(imgH-1))))),
			}
		}
		if int(dist(b.Quad[0], b.Quad[1])) <= 3 || int(dist(b.Quad[0], b.Quad[3])) <= 3 {
			continue
		}
		kept = append(kept, b)
	}
	ReadingOrder(kept)
	return kept, nil
}

// clockwise orders q's corners top-left, top-right, bottom-right,
// bottom-left: the top-left has the least x+y, the bottom-right the most,
// and of the other two the top-right has the lesser y-x.
func clockwise(q [4]engine.Point) [4]engine.Point {
	sum := func(p engine.Point) float32 { return p.X + p.Y }
	tl, br := 0, 0
	for i, p := range q {
		if sum(p) < sum(q[tl]) {
			tl = i
		}
		if sum(p) > sum(q[br]) {
			br = i
		}
	}
	var rest []engine.Point
	for i, p := range q {
		if i != tl && i != br {
			rest = append(rest, p)
		}
	}
	if tl == br { // all four on one anti-diagonal
		rest = rest[:2]
	}
	tr, bl := rest[0], rest[1]
	if bl.Y-bl.X < tr.Y-tr.X {
		tr, bl = bl, tr
	}
	return [4]engine.Point{q[tl], tr, q[br], bl}
}

// ReadingOrder sorts boxes top to bottom by their first corner, then
// swaps neighbours whose first corners are within lineSlack pixels of
// each other vertically so that each line reads left to right
// (PaddleOCR's sorted_boxes).
func ReadingOrder(boxes []Box) {
	slices.SortStableFunc(boxes, func(a, b Box) int {
		return cmp.Or(cmp.Compare(a.Quad[0].Y, b.Quad[0].Y), cmp.Compare(a.Quad[0].X, b.Quad[0].X))
	})
	for i := range len(boxes) - 1 {
		for j := i; j >= 0; j-- {
			a, b := boxes[j].Quad[0], boxes[j+1].Quad[0]
			if math.Abs(float64(b.Y-a.Y)) >= lineSlack || b.X >= a.X {
				break
			}
			boxes[j], boxes[j+1] = boxes[j+1], boxes[j]
		}
	}
}

func dist(a, b engine.Point) float64 {
	return math.Hypot(float64(a.X-b.X), float64(a.Y-b.Y))
}
