package ppocr

// Cutting text boxes out of an image, upright.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/imaging/cv"
)

// tallRatio is the height/width at or above which a crop is taken for a
// vertical line and turned 90° counter-clockwise (PaddleOCR's
// get_rotate_crop_image).
const tallRatio = 1.5

// Crop cuts the quadrilateral q (clockwise from its top-left corner) out
// of img and makes it an upright rectangle: a perspective warp to the
// longer of each pair of opposite sides (truncated to whole pixels),
// bicubic, the image's edge repeated past it. A crop at least 1.5 times
// as tall as wide is turned 90° counter-clockwise. It returns the crop
// and q's corners reordered to start at the crop's top-left.
func Crop(img imaging.RGB, q [4]engine.Point) (imaging.RGB, [4]engine.Point, error) {
	w := int(max(dist(q[0], q[1]), dist(q[2], q[3])))
	h := int(max(dist(q[0], q[3]), dist(q[1], q[2])))
	if w < 1 || h < 1 {
		return imaging.RGB{}, q, fmt.Errorf("crop: box %v is %d×%d", q, w, h)
	}
	crop, err := cv.WarpQuad(img, q, w, h)
	if err != nil {
		return imaging.RGB{}, q, fmt.Errorf("crop: %w", err)
	}
	if float64(h)/float64(w) >= tallRatio {
		return imaging.Rotate90(crop), turnBox(q, 1), nil
	}
	return crop, q, nil
}

// turnBox returns q's corners starting k places on: the corners of the same
// box when its content is turned k quarter turns counter-clockwise.
func turnBox(q [4]engine.Point, k int) [4]engine.Point {
	return [4]engine.Point{q[k%4], q[(k+1)%4], q[(k+2)%4], q[(k+3)%4]}
}

// Regions cuts boxes (in reading order) out of img as the detector stage
// sends them: Index, Box, Score and Crop set.
func Regions(img imaging.RGB, boxes []Box) (engine.Regions, error) {
	out := engine.Regions{Width: img.Width, Height: img.Height, Regions: make([]engine.Region, len(boxes))}
	for i, b := range boxes {
		crop, q, err := Crop(img, b.Quad)
		if err != nil {
			return engine.Regions{}, err
		}
		out.Regions[i] = engine.Region{Index: i, Box: q, Score: b.Score, Crop: crop.Crop()}
	}
	return out, nil
}
