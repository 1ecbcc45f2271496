package ppocr

// Writing images into the models' float32 input tensors.

import (
	"fmt"
	"math"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/imaging/cv"
)

// affine is a per-channel map of a 0-255 byte v to scale*v + shift, with
// the channels in the order of the tensor's planes: blue, green, red.
type affine struct {
	scale, shift [3]float32
}

// halfRange maps bytes to [-1, 1]: (v/255 - 0.5) / 0.5, the cls and rec
// models' normalization.
var halfRange = affine{scale: [3]float32{2.0 / 255, 2.0 / 255, 2.0 / 255}, shift: [3]float32{-1, -1, -1}}

// imageNet is (v/255 - mean) / std with ImageNet's mean and deviation,
// the det model's normalization. PaddleOCR lists them as (0.485, 0.456,
// 0.406) and (0.229, 0.224, 0.225) and applies them to the channels of a
// BGR image in that order, so blue gets the first.
var imageNet = func() affine {
	mean := [3]float32{0.485, 0.456, 0.406}
	std := [3]float32{0.229, 0.224, 0.225}
	var a affine
	for c := range 3 {
		a.scale[c] = 1 / (255 * std[c])
		a.shift[c] = -mean[c] / std[c]
	}
	return a
}()

// putPlanes writes m into dst, one image of a batch tensor: three planes
// (blue, green, red) of rows × stride values, m in the top-left corner of
// each, mapped by a. The rest of dst is left as it is (zero padding).
func putPlanes(dst []float32, rows, stride int, m imaging.RGB, a affine) {
	plane := rows * stride
	for y := range m.Height {
		src := m.Pix[3*y*m.Width : 3*(y+1)*m.Width]
		b := dst[y*stride : y*stride+m.Width]
		g := dst[plane+y*stride : plane+y*stride+m.Width]
		r := dst[2*plane+y*stride : 2*plane+y*stride+m.Width]
		for x := range m.Width {
			r[x] = float32(src[3*x])*a.scale[2] + a.shift[2]
			g[x] = float32(src[3*x+1])*a.scale[1] + a.shift[1]
			b[x] = float32(src[3*x+2])*a.scale[0] + a.shift[0]
		}
	}
}

// fitHeight writes c into dst (3×h×w planes) scaled to h pixels high and
// ceil(h × its aspect ratio) wide, at most w, mapped by halfRange; the
// rest of dst stays zero.
func fitHeight(dst []float32, c *engine.Crop, h, w int) error {
	m := imaging.FromCrop(c)
	if m.Width <= 0 || m.Height <= 0 || len(m.Pix) != 3*m.Width*m.Height {
		return fmt.Errorf("a %d×%d crop with %d bytes", m.Width, m.Height, len(m.Pix))
	}
	rw := min(int(math.Ceil(float64(h)*float64(m.Width)/float64(m.Height))), w)
	scaled, err := cv.Resize(m, rw, h)
	if err != nil {
		return err
	}
	putPlanes(dst, h, w, scaled, halfRange)
	return nil
}
