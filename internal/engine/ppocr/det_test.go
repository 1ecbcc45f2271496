package ppocr

import (
	"math"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
)

func TestDetSize(t *testing.T) {
	tests := []struct {
		opts         DetOptions
		w, h         int
		wantW, wantH int
	}{
		{DefaultDetOptions(), 800, 600, 800, 608},                             // 18.75 rounds up
		{DefaultDetOptions(), 1920, 1080, 960, 544},                           // halved: 540 is 16.9 × 32
		{DefaultDetOptions(), 1080, 1920, 544, 960},                           // the longer side is the height
		{DefaultDetOptions(), 10, 10, 32, 32},                                 // at least 32
		{DefaultDetOptions(), 80, 48, 64, 64},                                 // 2.5 and 1.5 round to even
		{DefaultDetOptions(), 3000, 30, 960, 32},                              // 9.6 pixels high: at least 32
		{DetOptions{LimitSideLen: 736, LimitType: "min"}, 368, 500, 736, 992}, // doubled
		{DetOptions{LimitSideLen: 736, LimitType: "min"}, 1000, 800, 992, 800},
	}
	for _, tt := range tests {
		if w, h := tt.opts.Size(tt.w, tt.h); w != tt.wantW || h != tt.wantH {
			t.Errorf("%+v: %d×%d → %d×%d; want %d×%d", tt.opts, tt.w, tt.h, w, h, tt.wantW, tt.wantH)
		}
	}
}

// solid returns a w×h image of one colour.
func solid(w, h int, r, g, b byte) imaging.RGB {
	m := imaging.NewRGB(w, h)
	for i := 0; i < len(m.Pix); i += 3 {
		m.Pix[i], m.Pix[i+1], m.Pix[i+2] = r, g, b
	}
	return m
}

func TestDetInput(t *testing.T) {
	in, err := DefaultDetOptions().Input(solid(100, 70, 255, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if in.Width != 96 || in.Height != 64 || len(in.Tensor) != 3*96*64 {
		t.Fatalf("%d×%d, %d values; want 96×64, %d", in.Width, in.Height, len(in.Tensor), 3*96*64)
	}
	// Planes blue, green, red; each (v/255 - mean) / std with the means
	// and deviations in that order.
	plane := 96 * 64
	want := []float64{(0 - 0.485) / 0.229, (0 - 0.456) / 0.224, (1 - 0.406) / 0.225}
	for p, w := range want {
		for _, i := range []int{0, plane / 2, plane - 1} {
			if got := float64(in.Tensor[p*plane+i]); math.Abs(got-w) > 1e-5 {
				t.Fatalf("plane %d, value %d: %v; want %v", p, i, got, w)
			}
		}
	}
	if _, err := (DetOptions{LimitSideLen: 960, LimitType: "long"}).Input(solid(4, 4, 0, 0, 0)); err == nil {
		t.Error("limit_type long: no error")
	}
}

// probMap returns a w×h map of background probability bg with each rect
// (in map pixels) set to its probability.
func probMap(w, h int, bg float32, rects map[[4]int]float32) []float32 {
	m := make([]float32, w*h)
	for i := range m {
		m[i] = bg
	}
	for r, p := range rects {
		for y := r[1]; y < r[3]; y++ {
			for x := r[0]; x < r[2]; x++ {
				m[y*w+x] = p
			}
		}
	}
	return m
}

// grown is the box DB post-processing makes of a text rectangle of w×h
// pixels at (x, y), in map coordinates: the rectangle through its edge
// pixels' centres (w-1 by h-1, as findContours and minAreaRect see it),
// grown on each side by its area × ratio / its perimeter.
func grown(x, y, w, h int, ratio float64) [4]float64 {
	fw, fh := float64(w-1), float64(h-1)
	d := fw * fh * ratio / (2 * (fw + fh))
	return [4]float64{float64(x) - d, float64(y) - d, float64(x) + fw + d, float64(y) + fh + d}
}

func TestDetect(t *testing.T) {
	const w, h = 200, 120
	prob := probMap(w, h, 0.05, map[[4]int]float32{
		{120, 20, 180, 40}:   0.9,  // a word right of the next, 2 pixels higher: the same line
		{20, 22, 100, 42}:    0.8,  // the line's first word
		{30, 70, 170, 90}:    0.95, // a second line
		{10, 100, 60, 110}:   0.5,  // text pixels, but too faint a box (box_thresh 0.6)
		{150, 100, 152, 102}: 0.99, // a speck: too small (min_size 3)
	})
	for _, scale := range []int{1, 2} {
		boxes, err := DefaultDBOptions().Detect(prob, w, h, scale*w, scale*h)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			rect  [4]float64
			score float32
		}{
			{grown(20, 22, 80, 20, 1.5), 0.8},
			{grown(120, 20, 60, 20, 1.5), 0.9},
			{grown(30, 70, 140, 20, 1.5), 0.95},
		}
		if len(boxes) != len(want) {
			t.Fatalf("scale %d: %d boxes %v; want %d", scale, len(boxes), boxes, len(want))
		}
		for i, b := range boxes {
			r := want[i].rect
			corners := [4][2]float64{{r[0], r[1]}, {r[2], r[1]}, {r[2], r[3]}, {r[0], r[3]}}
			for k, c := range corners {
				// Whole pixels at each step: clipper's, the rounding to the
				// image, then the truncation after clipping.
				x, y := c[0]*float64(scale), c[1]*float64(scale)
				if math.Abs(float64(b.Quad[k].X)-x) > 1.5*float64(scale) || math.Abs(float64(b.Quad[k].Y)-y) > 1.5*float64(scale) {
					t.Errorf("scale %d, box %d corner %d: %v; want about (%.1f, %.1f)", scale, i, k, b.Quad[k], x, y)
				}
			}
			if math.Abs(float64(b.Score-want[i].score)) > 1e-4 {
				t.Errorf("box %d score %v; want %v", i, b.Score, want[i].score)
			}
		}
	}
}

func TestDetectClips(t *testing.T) {
	// Text at the map's edge grows past it; its box stops at the image's
	// last pixel.
	prob := probMap(64, 32, 0, map[[4]int]float32{{0, 4, 40, 28}: 0.9})
	boxes, err := DefaultDBOptions().Detect(prob, 64, 32, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(boxes) != 1 {
		t.Fatalf("%d boxes; want 1", len(boxes))
	}
	for _, p := range boxes[0].Quad {
		if p.X < 0 || p.Y < 0 || p.X > 63 || p.Y > 31 {
			t.Errorf("corner %v is outside the 64×32 image", p)
		}
	}
	if q := boxes[0].Quad; q[0].X != 0 || q[0].Y != 0 || q[2].Y != 31 {
		t.Errorf("box %v; want it clipped to x 0, y 0 to 31", q)
	}
}

func TestDBScoreModesAndDilation(t *testing.T) {
	// An L of text: its rectangle holds background, its contour does not.
	prob := probMap(100, 100, 0, map[[4]int]float32{{10, 10, 30, 90}: 0.9, {30, 70, 90, 90}: 0.9})
	fast := DefaultDBOptions()
	fast.BoxThresh = 0
	slow := fast
	slow.ScoreMode = "slow"
	bf, err := fast.Boxes(prob, 100, 100, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := slow.Boxes(prob, 100, 100, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(bf) != 1 || len(bs) != 1 {
		t.Fatalf("%d and %d boxes; want 1 each", len(bf), len(bs))
	}
	if !(bf[0].Score < 0.6 && bs[0].Score > 0.85) {
		t.Errorf("scores fast %v, slow %v; want fast under 0.6 (the L fills under half its rectangle) and slow about 0.9", bf[0].Score, bs[0].Score)
	}
	// Two blocks one pixel apart are two boxes, one box once dilated.
	gap := probMap(100, 40, 0, map[[4]int]float32{{10, 10, 40, 30}: 0.9, {41, 10, 80, 30}: 0.9})
	dil := DefaultDBOptions()
	dil.UseDilation = true
	for _, tt := range []struct {
		opts DBOptions
		want int
	}{{DefaultDBOptions(), 2}, {dil, 1}} {
		b, err := tt.opts.Boxes(gap, 100, 40, 100, 40)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != tt.want {
			t.Errorf("use_dilation %v: %d boxes; want %d", tt.opts.UseDilation, len(b), tt.want)
		}
	}
}

func TestDBOptionsCheck(t *testing.T) {
	bad := []func(*DBOptions){
		func(o *DBOptions) { o.Thresh = 1 },
		func(o *DBOptions) { o.BoxThresh = float32(math.NaN()) },
		func(o *DBOptions) { o.MaxCandidates = 0 },
		func(o *DBOptions) { o.UnclipRatio = -1 },
		func(o *DBOptions) { o.ScoreMode = "exact" },
	}
	for i, f := range bad {
		o := DefaultDBOptions()
		f(&o)
		if _, err := o.Boxes(make([]float32, 4), 2, 2, 2, 2); err == nil {
			t.Errorf("case %d (%+v): no error", i, o)
		}
	}
	if _, err := DefaultDBOptions().Boxes(make([]float32, 3), 2, 2, 2, 2); err == nil {
		t.Error("a 2×2 map of 3 values: no error")
	}
}

func TestReadingOrder(t *testing.T) {
	at := func(x, y float32) Box { return Box{Quad: [4]engine.Point{{X: x, Y: y}}} }
	boxes := []Box{at(300, 52), at(10, 200), at(150, 45), at(20, 50), at(500, 58), at(20, 120)}
	ReadingOrder(boxes)
	var got []engine.Point
	for _, b := range boxes {
		got = append(got, b.Quad[0])
	}
	// The first line's four boxes are within 10 pixels of their
	// neighbours' tops and read left to right, whatever their y.
	want := []engine.Point{{X: 20, Y: 50}, {X: 150, Y: 45}, {X: 300, Y: 52}, {X: 500, Y: 58}, {X: 20, Y: 120}, {X: 10, Y: 200}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v; want %v", got, want)
		}
	}
}

func TestClockwise(t *testing.T) {
	tl, tr, br, bl := engine.Point{X: 10, Y: 12}, engine.Point{X: 90, Y: 8}, engine.Point{X: 92, Y: 30}, engine.Point{X: 12, Y: 34}
	for _, q := range [][4]engine.Point{{tl, tr, br, bl}, {br, bl, tl, tr}, {tr, tl, bl, br}, {bl, br, tr, tl}} {
		if got := clockwise(q); got != [4]engine.Point{tl, tr, br, bl} {
			t.Errorf("clockwise(%v) = %v; want %v", q, got, [4]engine.Point{tl, tr, br, bl})
		}
	}
}

func TestPageOrder(t *testing.T) {
	// Three lines of a 200×100 page that is upside down: in the image the
	// page's first line is at the bottom, and its second line's two
	// regions run right to left. The classifier turned each box so that
	// it starts at its text's top-left, at the right of the image.
	box := func(x0, y0, x1, y1 float32) [4]engine.Point {
		return turnBox([4]engine.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}, 2)
	}
	regions := []engine.Region{
		{Index: 0, Box: box(20, 10, 180, 25), Rotated: true, Text: "third"},
		{Index: 1, Box: box(20, 40, 90, 55), Rotated: true, Text: "second, right"},
		{Index: 2, Box: box(110, 42, 180, 57), Rotated: true, Text: "second, left"},
		{Index: 3, Box: box(20, 70, 180, 85), Rotated: true, Text: "first"},
		// At the image's bottom-left: the turned page's top-right, level
		// with its first line.
		{Index: 4, Box: [4]engine.Point{{X: 5, Y: 90}, {X: 15, Y: 90}, {X: 15, Y: 95}, {X: 5, Y: 95}}, Text: "a small upright mark"},
	}
	upright := slices.Clone(regions)
	for i := range upright {
		upright[i].Rotated = false
	}
	PageOrder(upright, 200, 100)
	for i, r := range upright {
		if r.Index != i || r.Text != regions[i].Text {
			t.Fatalf("an upright page's regions moved: %+v", upright)
		}
	}
	PageOrder(regions, 200, 100)
	var got []string
	for i, r := range regions {
		got = append(got, r.Text)
		if r.Index != i {
			t.Errorf("region %q has index %d at place %d", r.Text, r.Index, i)
		}
	}
	want := []string{"first", "a small upright mark", "second, left", "second, right", "third"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q; want %q", got, want)
	}
}
