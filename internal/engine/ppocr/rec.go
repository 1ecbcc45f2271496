package ppocr

// The recognizer's input: a batch of crops at one height, padded to one
// width.

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
)

// The recognizer's input height and least width (PaddleOCR's
// rec_image_shape 3,48,320).
const (
	RecHeight   = 48
	RecMinWidth = 320
)

// RecOptions are the recognizer's settings.
type RecOptions struct {
	// DropScore is the least mean confidence of a line for it to be kept.
	DropScore float32
	// SpaceScore, when above 0, reads a space between two characters the
	// model wrote with only blanks between them, neither a space nor
	// CJK (Chinese, Japanese, Korean, their punctuation and full-width
	// forms: written without spaces), when the space class scores at
	// least SpaceScore at one of those blank steps. The model, trained on
	// Chinese, often lets the blank win over the space class where a
	// narrow space is (in small English text, scaled to 48 pixels high,
	// a space is one or two steps of 8 pixels), but still scores the
	// space there: on generated English lines (internal/ocrtest, seeds
	// 101, 202 and 303) the space class scored 0.025 or more in the gap
	// of 249 of the 253 such spaces (the other 4 had no blank step), and
	// under 0.01 in each of the 12,088 gaps inside words. The space read
	// brings that best score as its confidence, and leaves the line's
	// Score as it was. 0 (PaddleOCR's way) reads only the spaces the
	// model wrote.
	SpaceScore float32
}

// GapSpaceScore is the SpaceScore that reads the spaces the model scored
// but did not write (see RecOptions.SpaceScore): between the space
// class's highest score in a gap inside a word (0.0094) and its lowest in
// a gap between words (0.025) on the lines it was chosen on.
const GapSpaceScore = 0.02

// DefaultRecOptions are PaddleOCR's: lines under 0.5 are dropped, and
// only the spaces the model wrote are read.
func DefaultRecOptions() RecOptions { return RecOptions{DropScore: 0.5} }

// Check reports a setting out of its range.
func (o RecOptions) Check() error {
	if !(o.DropScore >= 0 && o.DropScore <= 1) {
		return fmt.Errorf("rec drop_score %v: want 0 to 1", o.DropScore)
	}
	if !(o.SpaceScore >= 0 && o.SpaceScore <= 1) {
		return fmt.Errorf("rec space_score %v: want 0 to 1", o.SpaceScore)
	}
	return nil
}

// aspect is a crop's width over its height.
func aspect(c *engine.Crop) float64 {
	if c.Height <= 0 {
		return 0
	}
	return float64(c.Width) / float64(c.Height)
}

// RecWidth returns the width of the recognizer's input for a batch of
// crops: 48 times the widest aspect ratio among them, at least 320.
func RecWidth(crops []*engine.Crop) int {
	ratio := float64(RecMinWidth) / RecHeight
	for _, c := range crops {
		ratio = max(ratio, aspect(c))
	}
	return int(RecHeight * ratio)
}

// RecInput returns the recognizer's input for a batch of crops,
// N×3×48×W with W from RecWidth: each crop scaled to 48 pixels high
// (bilinear) and as wide as its aspect ratio makes it, rounded up, mapped
// to [-1, 1] and padded right with zeros.
func RecInput(crops []*engine.Crop) ([]float32, int, error) {
	w := RecWidth(crops)
	t, err := RecInputWidth(crops, w)
	return t, w, err
}

// RecBucket is the step of RecBucketWidth.
const RecBucket = 64

// RecBucketWidth returns the width of the recognizer's input for crop c on
// its own: 48 times its aspect ratio rounded up to a multiple of
// RecBucket, at least RecMinWidth. Crops of one bucket width stacked in a
// batch are read exactly as each is alone (PaddleOCR pads a batch to its
// widest crop instead, so a crop's reading depends on its batch), and a
// crop is padded by less than RecBucket pixels.
func RecBucketWidth(c *engine.Crop) int {
	w := int(math.Ceil(RecHeight * aspect(c)))
	w = (w + RecBucket - 1) / RecBucket * RecBucket
	return max(w, RecMinWidth)
}

// RecInputWidth returns the recognizer's input for crops padded to width
// w, N×3×48×w: each crop scaled to 48 pixels high and as wide as its
// aspect ratio makes it (at most w), mapped to [-1, 1] and padded right
// with zeros.
func RecInputWidth(crops []*engine.Crop, w int) ([]float32, error) {
	size := 3 * RecHeight * w
	if int64(len(crops))*int64(size) > engine.MaxTensorElements {
		return nil, fmt.Errorf("rec: %d crops of width %d pass the tensor limit", len(crops), w)
	}
	t := make([]float32, len(crops)*size)
	for i, c := range crops {
		if err := fitHeight(t[i*size:(i+1)*size], c, RecHeight, w); err != nil {
			return nil, fmt.Errorf("rec: crop %d: %w", i, err)
		}
	}
	return t, nil
}

// ByWidth returns the indexes of crops from the narrowest aspect ratio to
// the widest, so that batches cut from it in order pad their crops
// little (PaddleOCR's rec and cls batching).
func ByWidth(crops []*engine.Crop) []int {
	order := make([]int, len(crops))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(aspect(crops[a]), aspect(crops[b])) })
	return order
}
