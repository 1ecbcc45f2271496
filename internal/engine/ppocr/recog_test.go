package ppocr

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// quadrants returns a w×h image whose four quarters are red, green, blue
// and white, clockwise from the top-left.
func quadrants(w, h int) imaging.RGB {
	m := imaging.NewRGB(w, h)
	colours := [4][3]byte{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}}
	for y := range h {
		for x := range w {
			q := 0
			switch {
			case x >= w/2 && y < h/2:
				q = 1
			case x >= w/2:
				q = 2
			case y >= h/2:
				q = 3
			}
			copy(m.Pix[3*(y*w+x):], colours[q][:])
		}
	}
	return m
}

// pixel returns the colour at (x, y).
func pixel(m imaging.RGB, x, y int) [3]byte {
	i := 3 * (y*m.Width + x)
	return [3]byte{m.Pix[i], m.Pix[i+1], m.Pix[i+2]}
}

func TestCrop(t *testing.T) {
	img := quadrants(100, 100)
	red, green, white := [3]byte{255, 0, 0}, [3]byte{0, 255, 0}, [3]byte{255, 255, 255}
	// A wide box across the upper half: red left, green right.
	wide := [4]engine.Point{{X: 10, Y: 20}, {X: 90, Y: 20}, {X: 90, Y: 40}, {X: 10, Y: 40}}
	c, q, err := Crop(img, wide)
	if err != nil {
		t.Fatal(err)
	}
	if c.Width != 80 || c.Height != 20 || q != wide {
		t.Fatalf("%d×%d, corners %v; want 80×20, %v", c.Width, c.Height, q, wide)
	}
	if pixel(c, 5, 10) != red || pixel(c, 75, 10) != green {
		t.Errorf("crop's left %v and right %v; want red and green", pixel(c, 5, 10), pixel(c, 75, 10))
	}
	// A tall box down the left half, 1.5 times as tall as wide or more,
	// is read as a vertical line: turned 90° counter-clockwise, its top
	// (red) ends up on the left.
	tall := [4]engine.Point{{X: 20, Y: 10}, {X: 40, Y: 10}, {X: 40, Y: 90}, {X: 20, Y: 90}}
	c, q, err = Crop(img, tall)
	if err != nil {
		t.Fatal(err)
	}
	if c.Width != 80 || c.Height != 20 {
		t.Fatalf("tall box: %d×%d; want 80×20", c.Width, c.Height)
	}
	if pixel(c, 5, 10) != red || pixel(c, 75, 10) != white {
		t.Errorf("turned crop's left %v and right %v; want red and white", pixel(c, 5, 10), pixel(c, 75, 10))
	}
	if want := [4]engine.Point{tall[1], tall[2], tall[3], tall[0]}; q != want {
		t.Errorf("turned crop's corners %v; want %v (the crop's top-left first)", q, want)
	}

	r, err := Regions(img, []Box{{Quad: wide, Score: 0.7}, {Quad: tall, Score: 0.8}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Width != 100 || r.Height != 100 || len(r.Regions) != 2 {
		t.Fatalf("Regions: %d×%d with %d regions", r.Width, r.Height, len(r.Regions))
	}
	for i, reg := range r.Regions {
		if reg.Index != i || reg.Crop == nil || reg.Crop.Width != 80 || reg.Score != []float32{0.7, 0.8}[i] {
			t.Errorf("region %d: %+v", i, reg)
		}
	}
}

func TestClsInput(t *testing.T) {
	// 10 wide, 20 high: 24 wide at 48 high, then zeros.
	crop := solid(10, 20, 255, 255, 0).Crop()
	long := solid(400, 20, 0, 0, 0).Crop()
	in, err := DefaultClsOptions().Input([]*engine.Crop{crop, long})
	if err != nil {
		t.Fatal(err)
	}
	const plane = ClsHeight * ClsWidth
	if in.Rows != 2 || len(in.Tensor) != 2*3*plane {
		t.Fatalf("%d rows, %d values; want 2, %d", in.Rows, len(in.Tensor), 2*3*plane)
	}
	// Blue 0 → -1; red and green 255 → 1; padding 0.
	for _, tt := range []struct {
		plane, x int
		want     float32
	}{{0, 0, -1}, {1, 0, 1}, {2, 23, 1}, {2, 24, 0}, {0, 191, 0}} {
		if got := in.Tensor[tt.plane*plane+10*ClsWidth+tt.x]; math.Abs(float64(got-tt.want)) > 1e-6 {
			t.Errorf("plane %d, x %d: %v; want %v", tt.plane, tt.x, got, tt.want)
		}
	}
	// The long crop is squeezed into 192 columns.
	if got := in.Tensor[3*plane+10*ClsWidth+191]; got != -1 {
		t.Errorf("long crop's last column: %v; want -1", got)
	}
}

func TestClsWindows(t *testing.T) {
	// A crop 960 wide at 48 high, its columns' red channel their x/4:
	// three windows start at 0, 384 and 768.
	m := imaging.NewRGB(960, 48)
	for y := range 48 {
		for x := range 960 {
			m.Pix[3*(y*960+x)] = byte(x / 4)
		}
	}
	opts := DefaultClsOptions()
	opts.Windows = 3
	in, err := opts.Input([]*engine.Crop{m.Crop(), solid(50, 48, 0, 0, 0).Crop()})
	if err != nil {
		t.Fatal(err)
	}
	if in.Rows != 4 {
		t.Fatalf("%d rows; want 3 windows of the long crop and 1 of the short", in.Rows)
	}
	const size = 3 * ClsHeight * ClsWidth
	for k, x0 := range []int{0, 384, 768} {
		red := in.Tensor[k*size+2*ClsHeight*ClsWidth] // plane 2, (0, 0)
		if want := float32(x0/4)*2/255 - 1; math.Abs(float64(red-want)) > 1e-5 {
			t.Errorf("window %d starts with %v; want %v (column %d)", k, red, want, x0)
		}
	}
	// Two windows somewhat sure it is upside down and one unsure make it
	// surer; the short crop keeps its own scores.
	scores, err := in.Scores([]float32{0.3, 0.7, 0.2, 0.8, 0.5, 0.5, 0.9, 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if want := float32(0.7 * 0.8 / (0.7*0.8 + 0.3*0.2)); math.Abs(float64(scores[1]-want)) > 1e-4 || math.Abs(float64(scores[0]+scores[1]-1)) > 1e-6 {
		t.Errorf("long crop's scores %v; want 180° %v", scores[:2], want)
	}
	if scores[2] != 0.9 || scores[3] != 0.1 {
		t.Errorf("short crop's scores %v; want its own, [0.9 0.1]", scores[2:])
	}
	if _, err := in.Scores(make([]float32, 6)); err == nil {
		t.Error("6 scores for 4 rows: no error")
	}
}

func TestClsApply(t *testing.T) {
	box := [4]engine.Point{{X: 1, Y: 2}, {X: 30, Y: 2}, {X: 30, Y: 12}, {X: 1, Y: 12}}
	crop := quadrants(30, 10)
	regions := func() []engine.Region {
		var rs []engine.Region
		for i := range 4 {
			rs = append(rs, engine.Region{Index: i, Box: box, Crop: crop.Crop()})
		}
		return rs
	}
	// Sure it is upright; sure it is upside down (twice); leaning to
	// upside down, not surely enough.
	scores := []float32{0.99, 0.01, 0.03, 0.97, 0.02, 0.98, 0.2, 0.8}
	vote := DefaultClsOptions()
	vote.PageVote = true
	for _, tt := range []struct {
		name string
		opts ClsOptions
		want []bool
	}{
		{"each alone", DefaultClsOptions(), []bool{false, true, true, false}},
		{"page vote", vote, []bool{false, true, true, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := regions()
			if err := tt.opts.Apply(rs, scores); err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				if rs[i].Rotated != want {
					t.Errorf("region %d: Rotated %v; want %v", i, rs[i].Rotated, want)
				}
			}
			turned := imaging.FromCrop(rs[1].Crop)
			if pixel(turned, 0, 0) != [3]byte{0, 0, 255} || pixel(crop, 0, 0) != [3]byte{255, 0, 0} {
				t.Errorf("turned crop starts %v (want blue), the original %v (want red, untouched)", pixel(turned, 0, 0), pixel(crop, 0, 0))
			}
			if want := [4]engine.Point{box[2], box[3], box[0], box[1]}; rs[1].Box != want {
				t.Errorf("turned box %v; want %v", rs[1].Box, want)
			}
			if rs[0].Box != box || rs[0].Crop.Pixels[0] != 255 {
				t.Error("an upright region changed")
			}
		})
	}
	// An upright page: the vote turns only the sure ones.
	rs := regions()
	if err := vote.Apply(rs, []float32{0.99, 0.01, 0.95, 0.05, 0.2, 0.8, 0.02, 0.98}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, false, false, true} {
		if rs[i].Rotated != want {
			t.Errorf("upright page, region %d: Rotated %v; want %v", i, rs[i].Rotated, want)
		}
	}
	if err := DefaultClsOptions().Apply(rs, scores[:4]); err == nil {
		t.Error("4 scores for 4 regions: no error")
	}
}

func TestRecInput(t *testing.T) {
	short := solid(30, 24, 255, 255, 255).Crop() // 60 wide at 48
	long := solid(500, 48, 0, 0, 0).Crop()       // 500 wide: the batch's width
	if w := RecWidth([]*engine.Crop{short}); w != RecMinWidth {
		t.Errorf("RecWidth of a short crop: %d; want %d", w, RecMinWidth)
	}
	in, w, err := RecInput([]*engine.Crop{short, long})
	if err != nil {
		t.Fatal(err)
	}
	if w != 500 || len(in) != 2*3*RecHeight*500 {
		t.Fatalf("width %d, %d values; want 500, %d", w, len(in), 2*3*RecHeight*500)
	}
	row := in[20*500 : 21*500] // the short crop's blue plane, row 20
	if row[59] != 1 || row[60] != 0 || row[499] != 0 {
		t.Errorf("short crop's row: %v at 59, %v at 60, %v at 499; want 1, 0, 0", row[59], row[60], row[499])
	}
	if got := in[3*RecHeight*500+20*500+499]; got != -1 {
		t.Errorf("long crop's last column: %v; want -1", got)
	}
	order := ByWidth([]*engine.Crop{long, short, solid(90, 30, 0, 0, 0).Crop(), solid(60, 30, 0, 0, 0).Crop()})
	if !slices.Equal(order, []int{1, 3, 2, 0}) {
		t.Errorf("ByWidth: %v; want [1 3 2 0] (ratios 10.4, 1.25, 3, 2)", order)
	}
}

// ctcMatrix returns steps × classes scores, each step's mass on one class:
// best[t] with score[t], the rest spread evenly.
func ctcMatrix(classes int, best []int, score []float32) []float32 {
	m := make([]float32, len(best)*classes)
	for t, c := range best {
		rest := (1 - score[t]) / float32(classes-1)
		for k := range classes {
			m[t*classes+k] = rest
		}
		m[t*classes+c] = score[t]
	}
	return m
}

func TestDecode(t *testing.T) {
	d, err := ReadDict(strings.NewReader("a\nb\n好\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Classes() != 5 {
		t.Fatalf("%d classes; want 5: blank, a, b, 好, space", d.Classes())
	}
	const blank, a, b, hao, space = 0, 1, 2, 3, 4
	tests := []struct {
		name  string
		best  []int
		score []float32
		text  string
		conf  []float32
	}{
		{"repeats merge, a blank separates", []int{a, a, blank, a, b, space, hao, hao},
			[]float32{0.9, 0.8, 0.99, 0.7, 0.6, 0.95, 0.5, 0.9},
			"aab 好", []float32{0.9, 0.7, 0.6, 0.95, 0.5}},
		{"spaces at the ends trimmed", []int{space, a, space, b, space, space, blank},
			[]float32{0.5, 0.9, 0.8, 0.7, 0.6, 0.6, 0.9},
			"a b", []float32{0.9, 0.8, 0.7}},
		{"blanks only", []int{blank, blank}, []float32{0.9, 0.9}, "", nil},
		{"no steps", nil, nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line, err := (RecOptions{}).Decode(d, ctcMatrix(d.Classes(), tt.best, tt.score), len(tt.best))
			if err != nil {
				t.Fatal(err)
			}
			if line.Text != tt.text || !slices.Equal(line.Confidence, tt.conf) {
				t.Errorf("%q %v; want %q %v", line.Text, line.Confidence, tt.text, tt.conf)
			}
			// The score is the mean over every character decoded, the
			// trimmed spaces too, as PaddleOCR's.
			var sum, n float32
			for i, c := range tt.best {
				if c != blank && (i == 0 || tt.best[i-1] != c) {
					sum += tt.score[i]
					n++
				}
			}
			if want := sum / max(n, 1); math.Abs(float64(line.Score-want)) > 1e-6 {
				t.Errorf("score %v; want %v", line.Score, want)
			}
		})
	}
	if _, err := (RecOptions{}).Decode(d, make([]float32, 9), 2); err == nil {
		t.Error("9 scores for 2 steps of 5 classes: no error")
	}
}

func TestDecodeSpaces(t *testing.T) {
	d, err := ReadDict(strings.NewReader("a\nb\n好\n，\n"))
	if err != nil {
		t.Fatal(err)
	}
	const blank, a, b, hao, comma, space = 0, 1, 2, 3, 4, 5
	on := RecOptions{SpaceScore: GapSpaceScore}
	tests := []struct {
		name string
		opts RecOptions
		best []int
		// spaceAt is the space class's score at some steps (the best
		// class's stays 0.9).
		spaceAt map[int]float32
		text    string
		conf    []float32
	}{
		{"a scored gap between letters reads a space", on, []int{a, blank, blank, b}, map[int]float32{2: 0.3},
			"a b", []float32{0.9, 0.3, 0.9}},
		{"the gap's best score counts", on, []int{a, blank, blank, blank, b}, map[int]float32{1: 0.01, 2: 0.05, 3: 0.02},
			"a b", []float32{0.9, 0.05, 0.9}},
		{"a gap scored under SpaceScore reads none", on, []int{a, blank, blank, b}, map[int]float32{1: 0.015, 2: 0.01},
			"ab", []float32{0.9, 0.9}},
		{"no gap reads none", on, []int{a, b}, map[int]float32{0: 0.08, 1: 0.08},
			"ab", []float32{0.9, 0.9}},
		{"a repeated letter's gap", on, []int{a, blank, a, blank, a}, map[int]float32{1: 0.001, 3: 0.4},
			"aa a", []float32{0.9, 0.9, 0.4, 0.9}},
		{"never next to CJK", on, []int{a, blank, hao, blank, b, blank, comma, blank, b, blank, hao, blank, hao},
			map[int]float32{1: 0.5, 3: 0.5, 5: 0.5, 7: 0.5, 9: 0.5, 11: 0.5},
			"a好b，b好好", []float32{0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}},
		{"a written space is not doubled", on, []int{a, blank, space, blank, b}, map[int]float32{1: 0.4, 3: 0.4},
			"a b", []float32{0.9, 0.9, 0.9}},
		{"none at the ends", on, []int{blank, a, blank, b, blank}, map[int]float32{0: 0.5, 2: 0.5, 4: 0.5},
			"a b", []float32{0.9, 0.5, 0.9}},
		{"off", RecOptions{}, []int{a, blank, blank, b}, map[int]float32{2: 0.3},
			"ab", []float32{0.9, 0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			score := make([]float32, len(tt.best))
			for i := range score {
				score[i] = 0.9
			}
			m := ctcMatrix(d.Classes(), tt.best, score)
			for step, p := range tt.spaceAt {
				m[step*d.Classes()+space] = p
			}
			line, err := tt.opts.Decode(d, m, len(tt.best))
			if err != nil {
				t.Fatal(err)
			}
			if line.Text != tt.text || !slices.Equal(line.Confidence, tt.conf) {
				t.Errorf("%q %v; want %q %v", line.Text, line.Confidence, tt.text, tt.conf)
			}
			// The line's score is the model's characters' alone.
			if math.Abs(float64(line.Score-0.9)) > 1e-6 {
				t.Errorf("score %v; want 0.9", line.Score)
			}
		})
	}
}

func TestRecOptionsCheck(t *testing.T) {
	for _, tt := range []struct {
		opts RecOptions
		ok   bool
	}{
		{DefaultRecOptions(), true},
		{RecOptions{DropScore: 0.5, SpaceScore: GapSpaceScore}, true},
		{RecOptions{DropScore: 1, SpaceScore: 1}, true},
		{RecOptions{DropScore: 1.5}, false},
		{RecOptions{SpaceScore: -0.1}, false},
		{RecOptions{SpaceScore: float32(math.NaN())}, false},
	} {
		if err := tt.opts.Check(); (err == nil) != tt.ok {
			t.Errorf("%+v: %v; want ok %v", tt.opts, err, tt.ok)
		}
	}
}

func TestApplyRec(t *testing.T) {
	d, err := ReadDict(strings.NewReader("h\ni\n"))
	if err != nil {
		t.Fatal(err)
	}
	steps := 3
	probs := append(ctcMatrix(4, []int{1, 0, 2}, []float32{0.9, 0.9, 0.8}), // "hi", sure
		ctcMatrix(4, []int{1, 2, 0}, []float32{0.4, 0.45, 0.9})...) // "hi", unsure: dropped
	crop := solid(4, 4, 0, 0, 0).Crop()
	regions := []engine.Region{{Index: 3, Crop: crop}, {Index: 4, Crop: crop}}
	kept, err := DefaultRecOptions().ApplyRec(d, regions, probs, steps)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Index != 3 || kept[0].Text != "hi" || kept[0].Crop != nil || len(kept[0].Confidence) != 2 {
		t.Errorf("kept %+v; want region 3 reading \"hi\", its crop dropped", kept)
	}
}

func TestPPOCRDict(t *testing.T) {
	const path = "/usr/local/share/omnistage/models/ppocr-v4/ppocr_keys_v1.txt"
	if _, err := os.Stat(path); err != nil {
		testdeps.Missing(t, "the PP-OCR models are not installed (scripts/install-deps.sh): %v", err)
	}
	d, err := LoadDict(path)
	if err != nil {
		t.Fatal(err)
	}
	// The rec model's output has 6625 classes (its ONNX output shape).
	if d.Classes() != 6625 {
		t.Errorf("%d classes; want 6625", d.Classes())
	}
}
