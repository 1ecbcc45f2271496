package cv

// Resizing and perspective crops of RGB images.

/*
#include "ccv.h"
*/
import "C"

import (
	"fmt"
	"math"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
)

// MaxSide bounds each side of an image these functions make or read.
const MaxSide = 1 << 15

func checkRGB(what string, m imaging.RGB) error {
	if m.Width <= 0 || m.Height <= 0 || m.Width > MaxSide || m.Height > MaxSide || len(m.Pix) != 3*m.Width*m.Height {
		return fmt.Errorf("cv: %s: a %d×%d image with %d bytes", what, m.Width, m.Height, len(m.Pix))
	}
	return nil
}

func checkSize(what string, w, h int) error {
	if w <= 0 || h <= 0 || w > MaxSide || h > MaxSide {
		return fmt.Errorf("cv: %s: output size %d×%d", what, w, h)
	}
	return nil
}

// Resize returns src resized to w×h, bilinear (OpenCV's INTER_LINEAR).
func Resize(src imaging.RGB, w, h int) (imaging.RGB, error) {
	if err := checkRGB("resize", src); err != nil {
		return imaging.RGB{}, err
	}
	if err := checkSize("resize", w, h); err != nil {
		return imaging.RGB{}, err
	}
	dst := imaging.NewRGB(w, h)
	var eb errBuf
	rc := C.omni_cv_resize(cbytes(src.Pix), C.int(src.Width), C.int(src.Height), cbytes(dst.Pix), C.int(w), C.int(h), eb.ptr(), errLen)
	return dst, eb.err("resize", rc)
}

// WarpQuad returns the w×h image that the quadrilateral quad of src (its
// top-left, top-right, bottom-right and bottom-left corners) becomes in a
// perspective warp: bicubic (INTER_CUBIC), pixels past src's edge copied
// from the edge (BORDER_REPLICATE).
func WarpQuad(src imaging.RGB, quad [4]engine.Point, w, h int) (imaging.RGB, error) {
	if err := checkRGB("warp", src); err != nil {
		return imaging.RGB{}, err
	}
	if err := checkSize("warp", w, h); err != nil {
		return imaging.RGB{}, err
	}
	var q [8]C.float
	for i, p := range quad {
		if !finite(p.X) || !finite(p.Y) {
			return imaging.RGB{}, fmt.Errorf("cv: warp: corner %d is %v", i, p)
		}
		q[2*i], q[2*i+1] = C.float(p.X), C.float(p.Y)
	}
	dst := imaging.NewRGB(w, h)
	var eb errBuf
	rc := C.omni_cv_warp_quad(cbytes(src.Pix), C.int(src.Width), C.int(src.Height), &q[0], cbytes(dst.Pix), C.int(w), C.int(h), eb.ptr(), errLen)
	return dst, eb.err("warp", rc)
}

func finite(v float32) bool {
	return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
}
