package ocrtest

// What happens to a page between the printer and the reader: blur, noise,
// a camera's angle and light.

import (
	"math"
	"math/rand/v2"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/imaging/cv"
)

// Blur returns m blurred by a Gaussian of deviation sigma pixels.
func Blur(m imaging.RGB, sigma float64) imaging.RGB {
	radius := int(math.Ceil(3 * sigma))
	kernel := make([]float64, 2*radius+1)
	sum := 0.0
	for i := range kernel {
		d := float64(i - radius)
		kernel[i] = math.Exp(-d * d / (2 * sigma * sigma))
		sum += kernel[i]
	}
	for i := range kernel {
		kernel[i] /= sum
	}
	pass := func(src imaging.RGB, dx, dy int) imaging.RGB {
		out := imaging.NewRGB(src.Width, src.Height)
		for y := range src.Height {
			for x := range src.Width {
				var acc [3]float64
				for k, wt := range kernel {
					sx := min(max(x+dx*(k-radius), 0), src.Width-1)
					sy := min(max(y+dy*(k-radius), 0), src.Height-1)
					i := 3 * (sy*src.Width + sx)
					for c := range 3 {
						acc[c] += wt * float64(src.Pix[i+c])
					}
				}
				for c := range 3 {
					out.Pix[3*(y*src.Width+x)+c] = clamp8(acc[c])
				}
			}
		}
		return out
	}
	return pass(pass(m, 1, 0), 0, 1)
}

// Noise returns m with Gaussian noise of deviation sigma levels added to
// each channel of each pixel.
func Noise(m imaging.RGB, sigma float64, rng *rand.Rand) imaging.RGB {
	out := imaging.NewRGB(m.Width, m.Height)
	for i, v := range m.Pix {
		out.Pix[i] = clamp8(float64(v) + rng.NormFloat64()*sigma)
	}
	return out
}

// Photograph returns m as a hand-held camera might see it: turned by up
// to maxDegrees either way, seen a little from the side (each corner
// moved by up to 4% of the page's size), the page's edge repeated past
// it, lit more on one side than the other.
func Photograph(m imaging.RGB, maxDegrees float64, rng *rand.Rand) (imaging.RGB, error) {
	w, h := float64(m.Width), float64(m.Height)
	angle := (2*rng.Float64() - 1) * maxDegrees * math.Pi / 180
	sin, cos := math.Sin(angle), math.Cos(angle)
	// The source quad that fills the photo: the page's corners, a little
	// outside it so that the page stays whole in view, turned and pulled.
	corners := [4][2]float64{{-0.5, -0.5}, {0.5, -0.5}, {0.5, 0.5}, {-0.5, 0.5}}
	var quad [4]engine.Point
	for i, c := range corners {
		x := c[0]*w*1.08 + (2*rng.Float64()-1)*0.04*w
		y := c[1]*h*1.08 + (2*rng.Float64()-1)*0.04*h
		quad[i] = engine.Point{X: float32(w/2 + x*cos - y*sin), Y: float32(h/2 + x*sin + y*cos)}
	}
	out, err := cv.WarpQuad(m, quad, m.Width, m.Height)
	if err != nil {
		return imaging.RGB{}, err
	}
	// Light falls off by up to 20% across the page, in a random direction.
	dir := rng.Float64() * 2 * math.Pi
	dx, dy := math.Cos(dir), math.Sin(dir)
	for y := range out.Height {
		for x := range out.Width {
			t := ((float64(x)/w-0.5)*dx + (float64(y)/h-0.5)*dy + 0.71) / 1.42 // 0 to 1
			gain := 1 - 0.2*t
			i := 3 * (y*out.Width + x)
			for c := range 3 {
				out.Pix[i+c] = clamp8(float64(out.Pix[i+c]) * gain)
			}
		}
	}
	return out, nil
}
