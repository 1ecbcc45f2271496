package payload

// What a tensor, image or regions chunk must be to cross a hop.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// Bounds of the vision kinds in a payload.
const (
	// MaxRegions bounds the regions of one chunk.
	MaxRegions = 4096
	// MaxImageSide bounds an image's (and a crop's) width and height.
	MaxImageSide = 1 << 14
)

// ImageFormats are the formats an image chunk may hold.
var ImageFormats = []string{"png", "jpeg", "webp"}

func tensorsProblem(ts *engine.Tensors) string {
	if err := ts.Check(); err != nil {
		var ie *engine.InputError
		if errors.As(err, &ie) {
			return ie.Reason
		}
		return err.Error()
	}
	return ""
}

func imageProblem(im *engine.Image) string {
	switch {
	case !slices.Contains(ImageFormats, im.Format):
		return fmt.Sprintf("image format %q; want png, jpeg or webp", im.Format)
	case im.Width < 1 || im.Height < 1 || im.Width > MaxImageSide || im.Height > MaxImageSide:
		return fmt.Sprintf("image of %d×%d pixels; each side is 1 to %d", im.Width, im.Height, MaxImageSide)
	case len(im.Bytes) == 0:
		return "image has no bytes"
	}
	return ""
}

func regionsProblem(rs *engine.Regions) string {
	switch {
	case rs.Width < 1 || rs.Height < 1 || rs.Width > MaxImageSide || rs.Height > MaxImageSide:
		return fmt.Sprintf("regions of an image of %d×%d pixels; each side is 1 to %d", rs.Width, rs.Height, MaxImageSide)
	case len(rs.Regions) > MaxRegions:
		return fmt.Sprintf("%d regions; the limit is %d", len(rs.Regions), MaxRegions)
	}
	for i := range rs.Regions {
		if p := regionProblem(&rs.Regions[i]); p != "" {
			return fmt.Sprintf("regions[%d]: %s", i, p)
		}
	}
	return ""
}

func regionProblem(r *engine.Region) string {
	for _, p := range r.Box {
		if !finite(p.X) || !finite(p.Y) {
			return "its box has a corner that is not a finite number"
		}
	}
	switch {
	case r.Index < 0:
		return fmt.Sprintf("index %d; indexes count from 0", r.Index)
	case !finite(r.Score) || r.Score < 0 || r.Score > 1:
		return fmt.Sprintf("score %v; want 0 to 1", r.Score)
	case !utf8.ValidString(r.Text):
		return "its text is not valid UTF-8"
	case len(r.Confidence) != 0 && len(r.Confidence) != utf8.RuneCountInString(r.Text):
		return fmt.Sprintf("%d confidences for a text of %d code points", len(r.Confidence), utf8.RuneCountInString(r.Text))
	}
	if c := r.Crop; c != nil {
		if c.Width < 1 || c.Height < 1 || c.Width > MaxImageSide || c.Height > MaxImageSide {
			return fmt.Sprintf("a crop of %d×%d pixels; each side is 1 to %d", c.Width, c.Height, MaxImageSide)
		}
		if len(c.Pixels) != 3*c.Width*c.Height {
			return fmt.Sprintf("a crop of %d×%d RGB pixels has %d bytes, not %d", c.Width, c.Height, len(c.Pixels), 3*c.Width*c.Height)
		}
	}
	return ""
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
