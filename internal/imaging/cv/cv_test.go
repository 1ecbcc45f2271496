package cv

import (
	"image"
	"math"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
)

// gradient returns a w×h image whose pixel (x, y) is (x*10, y*10, x+y).
func gradient(w, h int) imaging.RGB {
	m := imaging.NewRGB(w, h)
	for y := range h {
		for x := range w {
			i := 3 * (y*w + x)
			m.Pix[i], m.Pix[i+1], m.Pix[i+2] = byte(x*10), byte(y*10), byte(x+y)
		}
	}
	return m
}

func TestResize(t *testing.T) {
	// Half-pixel centres, as OpenCV's INTER_LINEAR: the outer samples land
	// past the source's edge and take it, the inner ones a quarter of the
	// way from one pixel to the next.
	src := imaging.RGB{Width: 2, Height: 1, Pix: []byte{0, 0, 0, 255, 255, 255}}
	got, err := Resize(src, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 64, 64, 64, 191, 191, 191, 255, 255, 255}
	if !slices.Equal(got.Pix, want) {
		t.Errorf("Resize 2×1 to 4×1: %v; want %v", got.Pix, want)
	}
	if _, err := Resize(src, 0, 1); err == nil {
		t.Error("Resize to 0×1: no error")
	}
	if _, err := Resize(imaging.RGB{Width: 2, Height: 2, Pix: src.Pix}, 4, 4); err == nil {
		t.Error("Resize of an image with too few bytes: no error")
	}
}

func TestWarpQuad(t *testing.T) {
	src := gradient(10, 8)
	// An upright quad the size of the output is a plain cut.
	quad := [4]engine.Point{{X: 2, Y: 1}, {X: 7, Y: 1}, {X: 7, Y: 4}, {X: 2, Y: 4}}
	got, err := WarpQuad(src, quad, 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	for y := range 3 {
		for x := range 5 {
			i, j := 3*(y*5+x), 3*((y+1)*10+x+2)
			if !slices.Equal(got.Pix[i:i+3], src.Pix[j:j+3]) {
				t.Fatalf("pixel (%d, %d) is %v; want %v", x, y, got.Pix[i:i+3], src.Pix[j:j+3])
			}
		}
	}
	// Corners given from the bottom-right turn the cut 180°.
	turned, err := WarpQuad(src, [4]engine.Point{quad[2], quad[3], quad[0], quad[1]}, 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	back := imaging.Rotate180(turned)
	// The turned grid samples between pixels' centres (a one-pixel
	// shift), so compare the gradient's slope, not the bytes.
	if d := int(back.Pix[3*4]) - int(back.Pix[0]); d < 30 || d > 50 {
		t.Errorf("turned back, the red channel rises %d over 4 pixels; want about 40", d)
	}
	if _, err := WarpQuad(src, [4]engine.Point{{X: float32(math.NaN())}}, 5, 3); err == nil {
		t.Error("WarpQuad with a NaN corner: no error")
	}
}

func TestFindContours(t *testing.T) {
	const w, h = 20, 12
	mask := make([]byte, w*h)
	fill := func(r image.Rectangle, v byte) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				mask[y*w+x] = v
			}
		}
	}
	fill(image.Rect(1, 1, 6, 4), 255)   // a solid block
	fill(image.Rect(9, 2, 18, 10), 255) // a frame...
	fill(image.Rect(11, 4, 16, 8), 0)   // ...with a hole
	contours, err := FindContours(mask, w, h)
	if err != nil {
		t.Fatal(err)
	}
	var got []image.Rectangle
	for _, c := range contours {
		r := bounds(c)
		r.Max = r.Max.Add(image.Pt(1, 1)) // pixels, not points
		got = append(got, r)
	}
	slices.SortFunc(got, func(a, b image.Rectangle) int { return a.Min.X - b.Min.X })
	// The hole's border runs along the frame's pixels next to it.
	want := []image.Rectangle{image.Rect(1, 1, 6, 4), image.Rect(9, 2, 18, 10), image.Rect(10, 3, 17, 9)}
	if !slices.Equal(got, want) {
		t.Errorf("contours' bounds %v; want %v", got, want)
	}
	for _, c := range contours[:1] {
		if len(c) > 8 {
			t.Errorf("a rectangle's contour has %d points; CHAIN_APPROX_SIMPLE keeps its corners", len(c))
		}
	}
	if c, err := FindContours(make([]byte, w*h), w, h); err != nil || len(c) != 0 {
		t.Errorf("an empty mask: %d contours, %v", len(c), err)
	}
}

func TestMinAreaRect(t *testing.T) {
	// A square of side 10 turned 45°, its corners at (10,0), (17,7)...
	s := 10 / math.Sqrt2
	pts := []image.Point{
		image.Pt(20, 10), image.Pt(20+int(math.Round(s)), 10+int(math.Round(s))),
		image.Pt(20, 10+int(math.Round(2*s))), image.Pt(20-int(math.Round(s)), 10+int(math.Round(s))),
	}
	r, err := MinAreaRect(pts)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(r.Width)-9.9) > 0.2 || math.Abs(float64(r.Height)-9.9) > 0.2 {
		t.Errorf("sides %v×%v; want about 9.9×9.9", r.Width, r.Height)
	}
	for _, c := range r.Corners {
		if !slices.ContainsFunc(pts, func(p image.Point) bool {
			return math.Abs(float64(c.X)-float64(p.X)) < 0.5 && math.Abs(float64(c.Y)-float64(p.Y)) < 0.5
		}) {
			t.Errorf("corner %v is none of %v", c, pts)
		}
	}
	if _, err := MinAreaRect(nil); err == nil {
		t.Error("MinAreaRect of no points: no error")
	}
}

func TestPolygonMean(t *testing.T) {
	const w, h = 10, 10
	m := make([]float32, w*h)
	for y := range h {
		for x := range w {
			m[y*w+x] = float32(x) // the mean over any column band is its x
		}
	}
	tests := []struct {
		name string
		rect image.Rectangle
		poly []image.Point
		want float64
	}{
		{"the whole map", image.Rect(0, 0, w, h), []image.Point{{0, 0}, {9, 0}, {9, 9}, {0, 9}}, 4.5},
		{"one column", image.Rect(3, 0, 4, h), []image.Point{{0, 0}, {0, 9}}, 3},
		{"a band inside a larger rect", image.Rect(2, 2, 8, 8), []image.Point{{2, 0}, {3, 0}, {3, 5}, {2, 5}}, 4.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PolygonMean(m, w, h, tt.rect, tt.poly)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("mean %v; want %v", got, tt.want)
			}
		})
	}
	if _, err := PolygonMean(m, w, h, image.Rect(5, 5, 11, 11), []image.Point{{0, 0}}); err == nil {
		t.Error("a rect past the map: no error")
	}
}

func TestOffset(t *testing.T) {
	square := []image.Point{{0, 0}, {10, 0}, {10, 10}, {0, 10}}
	paths, err := Offset(square, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Fatalf("%d paths; want 1", len(paths))
	}
	if r := bounds(paths[0]); r != image.Rect(-2, -2, 12, 12) {
		t.Errorf("grown square's bounds %v; want (-2,-2)-(12,12)", r)
	}
	// Round joins: the square, four 10×2 sides and a circle of radius 2
	// in the corners make 192.6; at an arc tolerance of 0.25 each corner's
	// arc is a chord or two, which cut a little more. Mitred corners would
	// make 196.
	if a := area(paths[0]); a < 186 || a > 193 {
		t.Errorf("area %v; want 186 to 193", a)
	}
	big, err := Offset(square, 20)
	if err != nil || len(big) != 1 {
		t.Fatalf("grown by 20: %v, %v", big, err)
	}
	if a, round := area(big[0]), 100+4*10*20+math.Pi*400; a < round-35 || a > round {
		t.Errorf("grown by 20, area %v; want a little under %v (a 20-sided polygon for the circle)", a, round)
	}
	shrunk, err := Offset(square, -6)
	if err != nil || len(shrunk) != 0 {
		t.Errorf("a 10-pixel square shrunk by 6: %v, %v; want nothing", shrunk, err)
	}
}

func area(p []image.Point) float64 {
	s := 0
	for i := range p {
		j := (i + 1) % len(p)
		s += p[i].X*p[j].Y - p[j].X*p[i].Y
	}
	return math.Abs(float64(s)) / 2
}

// bounds returns the least rectangle whose corners hold every point.
func bounds(p []image.Point) image.Rectangle {
	r := image.Rectangle{Min: p[0], Max: p[0]}
	for _, q := range p {
		r.Min.X, r.Min.Y = min(r.Min.X, q.X), min(r.Min.Y, q.Y)
		r.Max.X, r.Max.Y = max(r.Max.X, q.X), max(r.Max.Y, q.Y)
	}
	return r
}
