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

// MaxClsWindows bounds ClsOptions.Windows.
const MaxClsWindows = 16

// ClsOptions are the classifier's settings.
type ClsOptions struct {
	// Thresh is the least 180° score that turns a crop.
	Thresh float32
	// Windows is how many 192-pixel windows of a crop scaled to 48 pixels
	// high the classifier sees, spread evenly along it, their scores
	// combined as independent evidence (their log-probabilities summed).
	// 1 is PaddleOCR's way: the crop's first 192 columns only, which for a
	// long line is its first few characters.
	Windows int
	// PageVote decides the page's orientation first: when the mean of the
	// regions' 180° scores, weighted by their boxes' area, is over one
	// half, the page is upside down and every region the classifier is
	// not sure is upright (its 0° score at most Thresh) is turned. Text on
	// a page shares one orientation, so the sure lines decide for the
	// unsure ones. Off, each region is decided alone, as PaddleOCR does.
	PageVote bool
}

// DefaultClsOptions are PaddleOCR's: a crop is turned when the classifier
// is more than 90% sure it is upside down, judged on its start alone.
func DefaultClsOptions() ClsOptions { return ClsOptions{Thresh: 0.9, Windows: 1} }

// Check reports what is wrong with o.
func (o ClsOptions) Check() error {
	if !(o.Thresh >= 0 && o.Thresh < 1) {
		return fmt.Errorf("cls thresh %v: want 0 to 1", o.Thresh)
	}
	if o.Windows < 1 || o.Windows > MaxClsWindows {
		return fmt.Errorf("cls windows %d: want 1 to %d", o.Windows, MaxClsWindows)
	}
	return nil
}

// ClsBatch is the classifier's input for some crops.
type ClsBatch struct {
	// Tensor is Rows×3×48×192: each crop's windows in turn, each scaled to
	// 48 pixels high (bilinear), mapped to [-1, 1] and padded right with
	// zeros.
	Tensor []float32
	Rows   int
	// owners[i] is the crop of row i.
	owners []int
	crops  int
}

// Input returns the classifier's input for crops.
func (o ClsOptions) Input(crops []*engine.Crop) (ClsBatch, error) {
	if err := o.Check(); err != nil {
		return ClsBatch{}, err
	}
	const size = 3 * ClsHeight * ClsWidth
	b := ClsBatch{crops: len(crops)}
	for i, c := range crops {
		m := imaging.FromCrop(c)
		if m.Width <= 0 || m.Height <= 0 || len(m.Pix) != 3*m.Width*m.Height {
			return ClsBatch{}, fmt.Errorf("cls: crop %d: a %d×%d crop with %d bytes", i, m.Width, m.Height, len(m.Pix))
		}
		rw := int(math.Ceil(ClsHeight * float64(m.Width) / float64(m.Height)))
		if o.Windows == 1 {
			rw = min(rw, ClsWidth) // PaddleOCR squeezes a long crop's start
		}
		scaled, err := cv.Resize(m, rw, ClsHeight)
		if err != nil {
			return ClsBatch{}, fmt.Errorf("cls: crop %d: %w", i, err)
		}
		n := min((rw+ClsWidth-1)/ClsWidth, o.Windows)
		for k := range n {
			x0 := 0
			if n > 1 {
				x0 = k * (rw - ClsWidth) / (n - 1)
			}
			b.Tensor = append(b.Tensor, make([]float32, size)...)
			putPlanes(b.Tensor[b.Rows*size:], ClsHeight, ClsWidth, columns(scaled, x0, min(ClsWidth, rw-x0)), halfRange)
			b.owners = append(b.owners, i)
			b.Rows++
		}
	}
	return b, nil
}

// columns returns the w columns of m from x0.
func columns(m imaging.RGB, x0, w int) imaging.RGB {
	if x0 == 0 && w == m.Width {
		return m
	}
	out := imaging.NewRGB(w, m.Height)
	for y := range m.Height {
		copy(out.Pix[3*y*w:3*(y+1)*w], m.Pix[3*(y*m.Width+x0):3*(y*m.Width+x0+w)])
	}
	return out
}

// Scores returns each crop's scores of 0° and 180° (2 a crop) from the
// classifier's output for b (probs, Rows×2): its windows' combined.
func (b ClsBatch) Scores(probs []float32) ([]float32, error) {
	if len(probs) != 2*b.Rows {
		return nil, fmt.Errorf("cls: %d scores for %d rows; want 2 each", len(probs), b.Rows)
	}
	logOdds := make([]float64, b.crops)
	windows := make([]int, b.crops)
	out := make([]float32, 2*b.crops)
	for r, c := range b.owners {
		const tiny = 1e-6 // no window is sure enough to decide alone
		logOdds[c] += math.Log(float64(probs[2*r+1])+tiny) - math.Log(float64(probs[2*r])+tiny)
		windows[c]++
		out[2*c], out[2*c+1] = probs[2*r], probs[2*r+1] // a crop of one window keeps its scores
	}
	for c, lo := range logOdds {
		if windows[c] > 1 {
			down := 1 / (1 + math.Exp(-lo))
			out[2*c], out[2*c+1] = float32(1-down), float32(down)
		}
	}
	return out, nil
}

// Apply applies the classifier's scores for an image's regions (scores,
// 2 a region: 0° and 180°, from Scores): a region whose 180° score is the
// higher and above o.Thresh (or, with PageVote on an upside-down page,
// whose 0° score is at most o.Thresh) gets its crop turned 180° (a new
// crop), Rotated set, and its Box's corners restarted at the turned
// text's top-left. regions is changed in place: pass a copy of a received
// chunk's slice.
func (o ClsOptions) Apply(regions []engine.Region, scores []float32) error {
	if len(scores) != 2*len(regions) {
		return fmt.Errorf("cls: %d scores for %d regions; want 2 each", len(scores), len(regions))
	}
	pageDown := false
	if o.PageVote {
		var all, down float64
		for i, r := range regions {
			a := area(r.Box)
			all += a
			down += a * float64(scores[2*i+1])
		}
		pageDown = down > all/2
	}
	for i := range regions {
		up, down := scores[2*i], scores[2*i+1]
		turn := down > up && down > o.Thresh
		if pageDown {
			turn = up <= o.Thresh
		}
		if !turn {
			continue
		}
		r := &regions[i]
		if r.Crop == nil {
			return fmt.Errorf("cls: region %d has no crop", r.Index)
		}
		r.Crop = imaging.Rotate180(imaging.FromCrop(r.Crop)).Crop()
		r.Rotated = !r.Rotated
		r.Box = turnBox(r.Box, 2)
	}
	return nil
}
