package ppocr

// DB post-processing: the detector's probability map to scored boxes.

import (
	"fmt"
	"image"
	"math"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging/cv"
)

// DBOptions are the settings of DB (differentiable binarization)
// post-processing.
type DBOptions struct {
	// Thresh is the probability above which a pixel is text.
	Thresh float32
	// BoxThresh is the least mean probability inside a box for it to be
	// kept.
	BoxThresh float32
	// MaxCandidates bounds the contours looked at.
	MaxCandidates int
	// UnclipRatio sets how far a box is grown: by its area × UnclipRatio
	// / its perimeter (the model finds shrunken text regions).
	UnclipRatio float64
	// MinSize is the least short side of a box before growing it, in map
	// pixels (MinSize+2 after).
	MinSize float32
	// ScoreMode is "fast" (a box is scored by the mean inside its
	// rectangle) or "slow" (inside its contour).
	ScoreMode string
	// UseDilation dilates the text pixels by a 2×2 kernel first.
	UseDilation bool
}

// DefaultDBOptions are PaddleOCR's for PP-OCRv4 (tools/infer/utility.py).
func DefaultDBOptions() DBOptions {
	return DBOptions{Thresh: 0.3, BoxThresh: 0.6, MaxCandidates: 1000, UnclipRatio: 1.5, MinSize: 3, ScoreMode: "fast"}
}

// Check reports what is wrong with o.
func (o DBOptions) Check() error {
	switch {
	case !(o.Thresh >= 0 && o.Thresh < 1):
		return fmt.Errorf("thresh %v: want 0 to 1", o.Thresh)
	case !(o.BoxThresh >= 0 && o.BoxThresh <= 1):
		return fmt.Errorf("box_thresh %v: want 0 to 1", o.BoxThresh)
	case o.MaxCandidates < 1:
		return fmt.Errorf("max_candidates %d: want at least 1", o.MaxCandidates)
	case !(o.UnclipRatio >= 0 && o.UnclipRatio <= 10):
		return fmt.Errorf("unclip_ratio %v: want 0 to 10", o.UnclipRatio)
	case !(o.MinSize >= 0):
		return fmt.Errorf("min_size %v: want 0 or more", o.MinSize)
	case o.ScoreMode != "fast" && o.ScoreMode != "slow":
		return fmt.Errorf("score_mode %q: want fast or slow", o.ScoreMode)
	}
	return nil
}

// Box is a detected text box.
type Box struct {
	// Quad is the box's corners. Boxes returns them as the boxes of least
	// area give them; Detect puts them clockwise from the top-left.
	Quad [4]engine.Point
	// Score is the mean text probability inside it.
	Score float32
}

// Boxes returns the text boxes of the detector's w×h probability map
// prob, in the coordinates of an imgW×imgH image that the map was made
// from (rounded to whole pixels and clipped to [0, imgW] × [0, imgH]), in
// the order of their contours.
func (o DBOptions) Boxes(prob []float32, w, h, imgW, imgH int) ([]Box, error) {
	if err := o.Check(); err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	if len(prob) != w*h || w <= 0 || h <= 0 {
		return nil, fmt.Errorf("db: a %d×%d map of %d values", w, h, len(prob))
	}
	mask := make([]byte, w*h)
	for i, p := range prob {
		if p > o.Thresh {
			mask[i] = 255
		}
	}
	if o.UseDilation {
		mask = dilate2x2(mask, w, h)
	}
	contours, err := cv.FindContours(mask, w, h)
	if err != nil {
		return nil, fmt.Errorf("db: %w", err)
	}
	var boxes []Box
	for _, contour := range contours[:min(len(contours), o.MaxCandidates)] {
		box, ok, err := o.box(prob, w, h, contour)
		if err != nil {
			return nil, fmt.Errorf("db: %w", err)
		}
		if !ok {
			continue
		}
		for i, p := range box.Quad {
			box.Quad[i] = engine.Point{
				X: float32(min(max(math.RoundToEven(float64(p.X)/float64(w)*float64(imgW)), 0), float64(imgW))),
				Y: float32(min(max(math.RoundToEven(float64(p.Y)/float64(h)*float64(imgH)), 0), float64(imgH))),
			}
		}
		boxes = append(boxes, box)
	}
	return boxes, nil
}

// box turns one contour into a scored box in map coordinates, or says it
// is too small or too faint.
func (o DBOptions) box(prob []float32, w, h int, contour []image.Point) (Box, bool, error) {
	quad, short, err := miniBox(contour)
	if err != nil || short < o.MinSize {
		return Box{}, false, err
	}
	var score float64
	if o.ScoreMode == "fast" {
		score, err = scoreQuad(prob, w, h, quad)
	} else {
		score, err = scoreContour(prob, w, h, contour)
	}
	if err != nil || float32(score) < o.BoxThresh {
		return Box{}, false, err
	}
	grown, err := unclip(quad, o.UnclipRatio)
	if err != nil || len(grown) == 0 {
		return Box{}, false, err
	}
	quad, short, err = miniBox(grown)
	if err != nil || short < o.MinSize+2 {
		return Box{}, false, err
	}
	return Box{Quad: quad, Score: float32(score)}, true, nil
}

// miniBox returns the rectangle of least area around pts, its corners
// ordered as PaddleOCR's get_mini_boxes orders them (the two leftmost
// first, upper then lower, ... : top-left, top-right, bottom-right,
// bottom-left for a box that is about level), and its shorter side.
func miniBox(pts []image.Point) ([4]engine.Point, float32, error) {
	r, err := cv.MinAreaRect(pts)
	if err != nil {
		return [4]engine.Point{}, 0, err
	}
	p := r.Corners
	slices.SortStableFunc(p[:], func(a, b engine.Point) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
	tl, bl := p[0], p[1]
	if p[1].Y <= p[0].Y {
		tl, bl = p[1], p[0]
	}
	tr, br := p[2], p[3]
	if p[3].Y <= p[2].Y {
		tr, br = p[3], p[2]
	}
	return [4]engine.Point{tl, tr, br, bl}, min(r.Width, r.Height), nil
}

// scoreQuad is the mean probability inside quad: PaddleOCR's
// box_score_fast, which fills the quad with its corners truncated to
// whole pixels within its bounding rectangle.
func scoreQuad(prob []float32, w, h int, quad [4]engine.Point) (float64, error) {
	x0, y0 := float64(quad[0].X), float64(quad[0].Y)
	x1, y1 := x0, y0
	for _, p := range quad[1:] {
		x0, x1 = min(x0, float64(p.X)), max(x1, float64(p.X))
		y0, y1 = min(y0, float64(p.Y)), max(y1, float64(p.Y))
	}
	rect := image.Rect(
		clampInt(int(math.Floor(x0)), 0, w-1), clampInt(int(math.Floor(y0)), 0, h-1),
		clampInt(int(math.Ceil(x1)), 0, w-1)+1, clampInt(int(math.Ceil(y1)), 0, h-1)+1)
	poly := make([]image.Point, 4)
	for i, p := range quad {
		poly[i] = image.Pt(int(p.X-float32(rect.Min.X)), int(p.Y-float32(rect.Min.Y)))
	}
	return cv.PolygonMean(prob, w, h, rect, poly)
}

// scoreContour is the mean probability inside the contour itself:
// PaddleOCR's box_score_slow.
func scoreContour(prob []float32, w, h int, contour []image.Point) (float64, error) {
	r := image.Rectangle{Min: contour[0], Max: contour[0]}
	for _, p := range contour {
		r.Min.X, r.Min.Y = min(r.Min.X, p.X), min(r.Min.Y, p.Y)
		r.Max.X, r.Max.Y = max(r.Max.X, p.X), max(r.Max.Y, p.Y)
	}
	rect := image.Rect(clampInt(r.Min.X, 0, w-1), clampInt(r.Min.Y, 0, h-1), clampInt(r.Max.X, 0, w-1)+1, clampInt(r.Max.Y, 0, h-1)+1)
	poly := make([]image.Point, len(contour))
	for i, p := range contour {
		poly[i] = p.Sub(rect.Min)
	}
	return cv.PolygonMean(prob, w, h, rect, poly)
}

// unclip grows quad by its area × ratio / its perimeter (Clipper's round
// offset of its corners truncated to whole pixels, as pyclipper takes
// them) and returns the points of every resulting polygon together.
func unclip(quad [4]engine.Point, ratio float64) ([]image.Point, error) {
	var area, length float64
	poly := make([]image.Point, 4)
	for i, p := range quad {
		q := quad[(i+1)%4]
		area += float64(p.X)*float64(q.Y) - float64(q.X)*float64(p.Y)
		length += math.Hypot(float64(q.X-p.X), float64(q.Y-p.Y))
		poly[i] = image.Pt(int(p.X), int(p.Y))
	}
	if length == 0 {
		return nil, nil
	}
	paths, err := cv.Offset(poly, math.Abs(area)/2*ratio/length)
	if err != nil {
		return nil, err
	}
	var pts []image.Point
	for _, p := range paths {
		pts = append(pts, p...)
	}
	return pts, nil
}

// dilate2x2 returns mask dilated by a 2×2 kernel anchored at its
// bottom-right cell, as OpenCV anchors an even kernel: a pixel is set
// when it or its left, upper or upper-left neighbour is.
func dilate2x2(mask []byte, w, h int) []byte {
	out := make([]byte, len(mask))
	for y := range h {
		for x := range w {
			v := mask[y*w+x]
			if x > 0 {
				v = max(v, mask[y*w+x-1])
			}
			if y > 0 {
				v = max(v, mask[(y-1)*w+x])
				if x > 0 {
					v = max(v, mask[(y-1)*w+x-1])
				}
			}
			out[y*w+x] = v
		}
	}
	return out
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }
