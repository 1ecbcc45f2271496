package ocrtest

// Drawing lines of text on a background.

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/math/fixed"

	"github.com/omnistage/omnistage/internal/imaging"
)

// Page is what an image shows: lines of text on a background.
type Page struct {
	Lines []string
	Font  *Font
	// Size is the font's size in pixels (its em).
	Size float64
	Ink  color.RGBA
	// Paper is the background's colour; Textured adds uneven shading and
	// grain to it.
	Paper    color.RGBA
	Textured bool
	// Margin is the room around the text, in pixels.
	Margin int
	// Leading is the distance between baselines over the size: 1.2 is
	// usual in print (1.5 when 0).
	Leading float64
}

// Render draws p; rng shapes the texture.
func (p Page) Render(rng *rand.Rand) (imaging.RGB, error) {
	face, err := p.Font.Face(p.Size)
	if err != nil {
		return imaging.RGB{}, fmt.Errorf("ocrtest: %s at %v px: %w", p.Font.Name, p.Size, err)
	}
	defer face.Close()
	for _, l := range p.Lines {
		if !p.Font.Has(l) {
			return imaging.RGB{}, fmt.Errorf("ocrtest: %s lacks a glyph of %q", p.Font.Name, l)
		}
	}
	m := face.Metrics()
	leading := p.Leading
	if leading == 0 {
		leading = 1.5
	}
	lineHeight := int(math.Ceil(p.Size * leading))
	width := 0
	for _, l := range p.Lines {
		width = max(width, font.MeasureString(face, l).Ceil())
	}
	w := width + 2*p.Margin
	h := (len(p.Lines)-1)*lineHeight + (m.Ascent + m.Descent).Ceil() + 2*p.Margin
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	paper(dst, p.Paper, p.Textured, rng)
	d := font.Drawer{Dst: dst, Src: image.NewUniform(p.Ink), Face: face}
	for i, l := range p.Lines {
		d.Dot = fixed.Point26_6{X: fixed.I(p.Margin), Y: fixed.I(p.Margin+i*lineHeight) + m.Ascent}
		d.DrawString(l)
	}
	return fromRGBA(dst), nil
}

// Wrap breaks text into lines of at most width pixels in f at size,
// between words.
func Wrap(text string, f *Font, size float64, width int) ([]string, error) {
	face, err := f.Face(size)
	if err != nil {
		return nil, err
	}
	defer face.Close()
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		next := word
		if line != "" {
			next = line + " " + word
		}
		if line != "" && font.MeasureString(face, next).Ceil() > width {
			lines = append(lines, line)
			next = word
		}
		line = next
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines, nil
}

// paper fills dst with c; textured, it adds shading that changes slowly
// across the page (a few random waves, ±12 levels) and grain (±8).
func paper(dst *image.RGBA, c color.RGBA, textured bool, rng *rand.Rand) {
	r := dst.Bounds()
	type wave struct{ fx, fy, phase, amp float64 }
	var waves []wave
	if textured {
		for range 3 {
			waves = append(waves, wave{
				fx: rng.Float64() * 2 * math.Pi / 150, fy: rng.Float64() * 2 * math.Pi / 150,
				phase: rng.Float64() * 2 * math.Pi, amp: 4,
			})
		}
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			shade := 0.0
			for _, w := range waves {
				shade += w.amp * math.Sin(w.fx*float64(x)+w.fy*float64(y)+w.phase)
			}
			if textured {
				shade += float64(rng.IntN(17) - 8)
			}
			i := dst.PixOffset(x, y)
			dst.Pix[i] = clamp8(float64(c.R) + shade)
			dst.Pix[i+1] = clamp8(float64(c.G) + shade)
			dst.Pix[i+2] = clamp8(float64(c.B) + shade)
			dst.Pix[i+3] = 255
		}
	}
}

// fromRGBA returns the RGB pixels of an opaque image.
func fromRGBA(m *image.RGBA) imaging.RGB {
	b := m.Bounds()
	out := imaging.NewRGB(b.Dx(), b.Dy())
	for y := range b.Dy() {
		for x := range b.Dx() {
			i := m.PixOffset(x+b.Min.X, y+b.Min.Y)
			copy(out.Pix[3*(y*out.Width+x):], m.Pix[i:i+3])
		}
	}
	return out
}

// toRGBA returns m as an image.Image, to encode it.
func toRGBA(m imaging.RGB) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, m.Width, m.Height))
	for i := range m.Width * m.Height {
		copy(out.Pix[4*i:], m.Pix[3*i:3*i+3])
		out.Pix[4*i+3] = 255
	}
	return out
}

func clamp8(v float64) uint8 {
	return uint8(min(max(math.Round(v), 0), 255))
}
