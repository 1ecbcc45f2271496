package ocrtest

// The generated test set.

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strings"

	"github.com/omnistage/omnistage/internal/imaging"
)

// The subsets of the set.
const (
	// English is upright English text.
	English = "en"
	// Rotated is English text turned 180°.
	Rotated = "rotated"
	// Chinese is upright Simplified Chinese text.
	Chinese = "zh"
)

// Sample is one test image and the text it shows.
type Sample struct {
	// Name says how the image was made: "en-03-liberation-serif-22px-
	// textured-blur".
	Name   string
	Subset string
	// Text is what the image says, its lines joined by "\n".
	Text  string
	Image imaging.RGB
	// PNG is Image as a PNG file.
	PNG []byte
}

// SetOptions say how many images of each subset Set makes, and from
// which seed.
type SetOptions struct {
	Seed                      uint64
	English, Rotated, Chinese int
}

// effects are what may happen to a page, one each, in turn.
var effects = []string{"clean", "blur", "noise", "photo"}

var (
	papers = []color.RGBA{{255, 255, 255, 255}, {246, 240, 226, 255}, {232, 234, 236, 255}}
	inks   = []color.RGBA{{0, 0, 0, 255}, {45, 45, 45, 255}, {20, 30, 95, 255}, {90, 25, 20, 255}}
)

// Set makes the test set: the same images for the same options.
func Set(opts SetOptions) ([]Sample, error) {
	all, err := Fonts()
	if err != nil {
		return nil, err
	}
	var latin, cjk []*Font
	for _, f := range all {
		if f.CJK {
			cjk = append(cjk, f)
		} else {
			latin = append(latin, f)
		}
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6f6d6e69))
	var out []Sample
	for _, sub := range []struct {
		name  string
		n     int
		fonts []*Font
	}{{English, opts.English, latin}, {Rotated, opts.Rotated, latin}, {Chinese, opts.Chinese, cjk}} {
		for i := range sub.n {
			s, err := sample(sub.name, i, sub.fonts[i%len(sub.fonts)], rng)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// sample makes the i-th image of subset.
func sample(subset string, i int, f *Font, rng *rand.Rand) (Sample, error) {
	sizes := []float64{16, 18, 22, 28, 36}
	if subset == Chinese {
		sizes = []float64{20, 24, 28, 36}
	}
	size := sizes[rng.IntN(len(sizes))]
	p := Page{
		Font: f, Size: size,
		Ink: inks[rng.IntN(len(inks))], Paper: papers[rng.IntN(len(papers))],
		Textured: rng.IntN(5) < 2,
		Margin:   int(size * (1.5 + rng.Float64())),
		Leading:  1.15 + 0.45*rng.Float64(),
	}
	lines, err := text(subset, i, f, size, rng)
	if err != nil {
		return Sample{}, err
	}
	p.Lines = lines
	img, err := p.Render(rng)
	if err != nil {
		return Sample{}, err
	}
	effect := effects[i%len(effects)]
	switch effect {
	case "blur":
		img = Blur(img, 0.8+0.5*rng.Float64())
	case "noise":
		img = Noise(img, 10+8*rng.Float64(), rng)
	case "photo":
		if img, err = Photograph(img, 4, rng); err != nil {
			return Sample{}, err
		}
	}
	if subset == Rotated {
		img = imaging.Rotate180(img)
	}
	b, err := encodePNG(img)
	if err != nil {
		return Sample{}, err
	}
	paper := "plain"
	if p.Textured {
		paper = "textured"
	}
	return Sample{
		Name:   fmt.Sprintf("%s-%02d-%s-%gpx-%s-%s", subset, i, strings.ToLower(strings.ReplaceAll(f.Name, " ", "-")), size, paper, effect),
		Subset: subset, Text: strings.Join(lines, "\n"), Image: img, PNG: b,
	}, nil
}

// text picks the lines of the i-th image of subset: one line, a few, or
// (English) a paragraph wrapped to the page.
func text(subset string, i int, f *Font, size float64, rng *rand.Rand) ([]string, error) {
	pool := englishLines
	if subset == Chinese {
		pool = chineseLines
	}
	switch i % 3 {
	case 0:
		return []string{pool[rng.IntN(len(pool))]}, nil
	case 1:
		n := 2 + rng.IntN(3)
		start := rng.IntN(len(pool))
		lines := make([]string, n)
		for k := range lines {
			lines[k] = pool[(start+k)%len(pool)]
		}
		return lines, nil
	}
	if subset == Chinese {
		start := rng.IntN(len(pool))
		return []string{pool[start], pool[(start+5)%len(pool)], pool[(start+9)%len(pool)], pool[(start+13)%len(pool)]}, nil
	}
	para := englishParagraphs[rng.IntN(len(englishParagraphs))]
	return Wrap(para, f, size, int(size*(22+8*rng.Float64())))
}

// Document is a clean page of lines, black on white in DejaVu Sans at 28
// pixels: a test's image of known text.
func Document(lines ...string) (Sample, error) {
	all, err := Fonts()
	if err != nil {
		return Sample{}, err
	}
	p := Page{Lines: lines, Font: all[0], Size: 28, Ink: inks[0], Paper: papers[0], Margin: 24, Leading: 1.5}
	img, err := p.Render(rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return Sample{}, err
	}
	b, err := encodePNG(img)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Name: "document", Subset: English, Text: strings.Join(lines, "\n"), Image: img, PNG: b}, nil
}

func encodePNG(img imaging.RGB) ([]byte, error) {
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, toRGBA(img)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
