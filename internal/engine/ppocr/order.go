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
	firsts := make([]engine.Point, len(boxes))
	for i, b := range boxes {
		firsts[i] = b.Quad[0]
	}
	sorted := make([]Box, len(boxes))
	for i, k := range readingOrder(firsts) {
		sorted[i] = boxes[k]
	}
	copy(boxes, sorted)
}

// readingOrder returns the indexes of the top-left corners tl in reading
// order (see ReadingOrder).
func readingOrder(tl []engine.Point) []int {
	order := make([]int, len(tl))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(tl[a].Y, tl[b].Y), cmp.Compare(tl[a].X, tl[b].X))
	})
	for i := range len(order) - 1 {
		for j := i; j >= 0; j-- {
			a, b := tl[order[j]], tl[order[j+1]]
			if math.Abs(float64(b.Y-a.Y)) >= lineSlack || b.X >= a.X {
				break
			}
			order[j], order[j+1] = order[j+1], order[j]
		}
	}
	return order
}

// PageOrder puts an image's regions, after the classifier, in the
// reading order of the page as its text stands. When the classifier
// turned most of the text (regions holding more than half of the boxes'
// area are Rotated), the page is upside down: its first line is at the
// bottom of the image, and each line starts at its right. The regions
// are then sorted as ReadingOrder sorts boxes, by their Box's first
// corner (the turned text's top-left) seen in the page turned upright,
// and their Index renumbered. An upright page's regions are left as
// they are. w and h are the image's size.
func PageOrder(regions []engine.Region, w, h int) {
	var turned, all float64
	for _, r := range regions {
		a := area(r.Box)
		all += a
		if r.Rotated {
			turned += a
		}
	}
	if turned <= all/2 {
		return
	}
	firsts := make([]engine.Point, len(regions))
	for i, r := range regions {
		firsts[i] = engine.Point{X: float32(w) - r.Box[0].X, Y: float32(h) - r.Box[0].Y}
	}
	sorted := make([]engine.Region, len(regions))
	for i, k := range readingOrder(firsts) {
		sorted[i] = regions[k]
		sorted[i].Index = i
	}
	copy(regions, sorted)
}

// area is the area of the quadrilateral q.
func area(q [4]engine.Point) float64 {
	s := 0.0
	for i, p := range q {
		n := q[(i+1)%4]
		s += float64(p.X)*float64(n.Y) - float64(n.X)*float64(p.Y)
	}
	return math.Abs(s) / 2
}

func dist(a, b engine.Point) float64 {
	return math.Hypot(float64(a.X-b.X), float64(a.Y-b.Y))
}
