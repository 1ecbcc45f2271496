package ppocr

// The detector's input: the image scaled to multiples of 32, normalized.

import (
	"fmt"
	"math"

	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/imaging/cv"
)

// DetOptions say how an image is scaled for the detector.
type DetOptions struct {
	// LimitSideLen is the side length LimitType bounds.
	LimitSideLen int
	// LimitType is "max" (a longer side is scaled down to LimitSideLen)
	// or "min" (a shorter side is scaled up to it).
	LimitType string
}

// DefaultDetOptions are PaddleOCR's for PP-OCRv4: the longer side at most
// 960 pixels.
func DefaultDetOptions() DetOptions {
	return DetOptions{LimitSideLen: 960, LimitType: "max"}
}

// Check reports what is wrong with o.
func (o DetOptions) Check() error {
	if o.LimitSideLen < 32 || o.LimitSideLen > cv.MaxSide {
		return fmt.Errorf("limit_side_len %d: want 32 to %d", o.LimitSideLen, cv.MaxSide)
	}
	if o.LimitType != "max" && o.LimitType != "min" {
		return fmt.Errorf("limit_type %q: want max or min", o.LimitType)
	}
	return nil
}

// Size returns the size of the detector's input for a w×h image: scaled
// as o says, each side truncated, then rounded to the nearest multiple of
// 32 (halves to even, as Python rounds), at least 32.
func (o DetOptions) Size(w, h int) (int, int) {
	ratio := 1.0
	side := float64(o.LimitSideLen)
	switch {
	case o.LimitType == "max" && max(w, h) > o.LimitSideLen:
		ratio = side / float64(max(w, h))
	case o.LimitType == "min" && min(w, h) < o.LimitSideLen:
		ratio = side / float64(min(w, h))
	}
	round32 := func(n int) int {
		return max(int(math.RoundToEven(float64(n)/32))*32, 32)
	}
	return round32(int(float64(w) * ratio)), round32(int(float64(h) * ratio))
}

// DetInput is the detector's input for one image.
type DetInput struct {
	// Tensor is 1×3×Height×Width: the image scaled (bilinear), its planes
	// blue, green, red, normalized with ImageNet's mean and deviation.
	Tensor        []float32
	Width, Height int
}

// Input returns the detector's input for img.
func (o DetOptions) Input(img imaging.RGB) (DetInput, error) {
	if err := o.Check(); err != nil {
		return DetInput{}, fmt.Errorf("det: %w", err)
	}
	w, h := o.Size(img.Width, img.Height)
	scaled := img
	if w != img.Width || h != img.Height {
		var err error
		if scaled, err = cv.Resize(img, w, h); err != nil {
			return DetInput{}, fmt.Errorf("det: %w", err)
		}
	}
	in := DetInput{Tensor: make([]float32, 3*w*h), Width: w, Height: h}
	putPlanes(in.Tensor, h, w, scaled, imageNet)
	return in, nil
}
