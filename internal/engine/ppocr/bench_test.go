package ppocr

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/ocrtest"
)

// benchRegions returns the regions det finds in a few generated pages
// (English paragraphs and lines, Chinese lines), crops included.
func benchRegions(b *testing.B, r *reader) [][]engine.Region {
	b.Helper()
	set, err := ocrtest.Set(ocrtest.SetOptions{Seed: 5, English: 6, Chinese: 3})
	if err != nil {
		b.Skip(err)
	}
	var pages [][]engine.Region
	for _, s := range set {
		img, err := imaging.Decode(s.PNG, imaging.DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		in, err := r.detOpts.Input(img)
		if err != nil {
			b.Fatal(err)
		}
		prob, _, err := r.det.run(in.Tensor, 1, 3, int64(in.Height), int64(in.Width))
		if err != nil {
			b.Fatal(err)
		}
		boxes, err := r.dbOpts.Detect(prob, in.Width, in.Height, img.Width, img.Height)
		if err != nil {
			b.Fatal(err)
		}
		regions, err := Regions(img, boxes)
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, regions.Regions)
	}
	return pages
}

// BenchmarkRecognize reads the lines of a few pages with the recognizer
// on one thread, a batch of 1 and of 6 (PaddleOCR's) crops at a time,
// narrowest first: what batching costs or saves.
func BenchmarkRecognize(b *testing.B) {
	r := newReader(b)
	pages := benchRegions(b, r)
	for _, batch := range []int{1, paddleBatch} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			rb := r.with(r.dbOpts, r.clsOpts, batch)
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range pages {
					if _, err := rb.recognize(append([]engine.Region(nil), p...)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkDetInput makes the detector's input for a 1280×720 image
// (scaled to 960×544).
func BenchmarkDetInput(b *testing.B) {
	img := noise(1280, 720)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DefaultDetOptions().Input(img); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDetect post-processes a 960×544 probability map with 40 text
// lines.
func BenchmarkDetect(b *testing.B) {
	rects := map[[4]int]float32{}
	for i := range 20 {
		y := 10 + 26*i
		rects[[4]int{20, y, 440, y + 14}] = 0.9
		rects[[4]int{500, y, 930, y + 14}] = 0.8
	}
	prob := probMap(960, 544, 0.02, rects)
	b.ReportAllocs()
	for b.Loop() {
		boxes, err := DefaultDBOptions().Detect(prob, 960, 544, 1280, 725)
		if err != nil || len(boxes) != 40 {
			b.Fatalf("%d boxes, %v", len(boxes), err)
		}
	}
}

// BenchmarkRecInput makes the recognizer's input for six crops of a line
// each.
func BenchmarkRecInput(b *testing.B) {
	var crops []*engine.Crop
	for i := range 6 {
		crops = append(crops, noise(300+40*i, 30).Crop())
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := RecInput(crops); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCTCDecode decodes one line's output: 120 steps of 6625
// classes.
func BenchmarkCTCDecode(b *testing.B) {
	d := &Dict{chars: make([]string, 6625)}
	for i := 1; i < len(d.chars); i++ {
		d.chars[i] = string(rune('a' + i%26))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	best := make([]int, 120)
	score := make([]float32, 120)
	for t := range best {
		best[t], score[t] = rng.IntN(6625), 0.9
	}
	probs := ctcMatrix(6625, best, score)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (RecOptions{SpaceScore: GapSpaceScore}).Decode(d, probs, 120); err != nil {
			b.Fatal(err)
		}
	}
}

// noise returns a w×h image of random pixels.
func noise(w, h int) imaging.RGB {
	m := imaging.NewRGB(w, h)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range m.Pix {
		m.Pix[i] = byte(rng.IntN(256))
	}
	return m
}
