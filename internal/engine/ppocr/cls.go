package ppocr

// The direction classifier: crops to its input, its scores to turned
// crops.

import (
	"fmt"
	"math"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/imaging/cv"
)

// The classifier's input size (PaddleOCR's cls_image_shape 3,48,192).
const (
	ClsHeight = 48
	ClsWidth  = 192
)

// ClsOptions are the classifier's settings.
type ClsOptions struct {
	// Thresh is the least 180° score that turns a crop.
	Thresh float32
}

// DefaultClsOptions are PaddleOCR's: turn a crop when the classifier is
// more than 90% sure it is upside down.
func DefaultClsOptions() ClsOptions { return ClsOptions{Thresh: 0.9} }

// ClsInput returns the classifier's input for crops, N×3×48×192: each
// crop scaled to 48 pixels high (bilinear) and as wide as its aspect
// ratio makes it, rounded up, at most 192, mapped to [-1, 1] and padded
// right with zeros.
func ClsInput(crops []*engine.Crop) ([]float32, error) {
	const size = 3 * ClsHeight * ClsWidth
	t := make([]float32, len(crops)*size)
	for i, c := range crops {
		if err := fitHeight(t[i*size:(i+1)*size], c, ClsHeight, ClsWidth); err != nil {
			return nil, fmt.Errorf("cls: crop %d: %w", i, err)
		}
	}
	return t, nil
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

// ApplyCls applies the classifier's output for regions (probs, N×2: the
// scores of 0° and 180°): a region whose 180° score is the higher and
// above o.Thresh gets its crop turned 180° (a new crop), Rotated set, and
// its Box's corners restarted at the turned text's top-left. regions is
// changed in place: pass a copy of a received chunk's slice.
func (o ClsOptions) ApplyCls(regions []engine.Region, probs []float32) error {
	if len(probs) != 2*len(regions) {
		return fmt.Errorf("cls: %d scores for %d regions; want 2 each", len(probs), len(regions))
	}
	for i := range regions {
		up, down := probs[2*i], probs[2*i+1]
		if !(down > up && down > o.Thresh) {
			continue
		}
		r := &regions[i]
		if r.Crop == nil {
			return fmt.Errorf("cls: region %d has no crop", r.Index)
		}
		r.Crop = imaging.Rotate180(imaging.FromCrop(r.Crop)).Crop()
		r.Rotated = !r.Rotated
		r.Box = turn(r.Box, 2)
	}
	return nil
}
