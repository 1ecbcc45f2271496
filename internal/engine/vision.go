package engine

// The kinds of images and the text found in them.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of the image and regions kinds, wherever they travel.
const (
	// MaxRegions bounds the regions of one chunk.
	MaxRegions = 4096
	// MaxImageSide bounds an image's (and a crop's) width and height.
	MaxImageSide = 1 << 14
)

// ImageFormats are the formats an image chunk may hold.
var ImageFormats = []string{"png", "jpeg", "webp"}

// Image is an encoded image: the bytes of a PNG, JPEG or WebP file, and
// what its header says of it.
type Image struct {
	// Format is "png", "jpeg" or "webp".
	Format        string
	Width, Height int
	Bytes         []byte
}

// Check reports what is wrong with im as an *InputError: a format not
// in ImageFormats, a side out of 1..MaxImageSide, or no bytes. It reads
// the header fields only: whether the bytes are such an image is the
// decoder's to find.
func (im *Image) Check() error {
	switch {
	case !slices.Contains(ImageFormats, im.Format):
		return &InputError{Reason: fmt.Sprintf("image format %q; want png, jpeg or webp", im.Format)}
	case im.Width < 1 || im.Height < 1 || im.Width > MaxImageSide || im.Height > MaxImageSide:
		return &InputError{Reason: fmt.Sprintf("image of %d×%d pixels; each side is 1 to %d", im.Width, im.Height, MaxImageSide)}
	case len(im.Bytes) == 0:
		return &InputError{Reason: "image has no bytes"}
	}
	return nil
}

// Point is a point in an image's pixel coordinates: x to the right, y
// down, from the top-left corner of the top-left pixel.
type Point struct {
	X, Y float32
}

// Crop is the part of an image a recognizer reads, cut out along a
// region's box and made upright: RGB, 8 bits a channel, row-major.
type Crop struct {
	Width, Height int
	Pixels        []byte
}

// Region is one text region of an image.
type Region struct {
	// Index is the region's place in reading order among the image's
	// regions, from 0.
	Index int
	// Box is the region's quadrilateral in the image, clockwise from the
	// top-left corner of its text.
	Box [4]Point
	// Score is the detector's confidence that the box holds text.
	Score float32
	// Crop is what the recognizer reads; nil once it has been read, when
	// the stage that read it no longer carries it.
	Crop *Crop
	// Rotated says a classifier turned the crop 180° (its text was upside
	// down in the image).
	Rotated bool
	// Text is the recognized text ("" before recognition), and
	// Confidence the recognizer's confidence in each of its code points.
	Text       string
	Confidence []float32
}

// Regions is a chunk of kind regions: some of an image's text regions, in
// reading order. A stage may send an image's regions in several chunks
// (a recognizer sends each line as it reads it).
type Regions struct {
	// Width and Height are the image's size in pixels.
	Width, Height int
	Regions       []Region
}

// Check reports what is wrong with rs as an *InputError: an image side
// out of 1..MaxImageSide, more than MaxRegions regions, or a region's own
// fault (named by its place, "regions[3]: ...").
func (rs *Regions) Check() error {
	switch {
	case rs.Width < 1 || rs.Height < 1 || rs.Width > MaxImageSide || rs.Height > MaxImageSide:
		return &InputError{Reason: fmt.Sprintf("regions of an image of %d×%d pixels; each side is 1 to %d", rs.Width, rs.Height, MaxImageSide)}
	case len(rs.Regions) > MaxRegions:
		return &InputError{Reason: fmt.Sprintf("%d regions; the limit is %d", len(rs.Regions), MaxRegions)}
	}
	for i := range rs.Regions {
		if p := rs.Regions[i].problem(); p != "" {
			return &InputError{Reason: fmt.Sprintf("regions[%d]: %s", i, p)}
		}
	}
	return nil
}

// problem says what is wrong with r, or "": a negative index, a corner,
// score or confidence that is not a finite number (a score out of 0..1),
// text that is not UTF-8, confidences that are not one per code point of
// the text, or a crop whose sides are out of 1..MaxImageSide or whose
// pixels are not 3 bytes each.
func (r *Region) problem() string {
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
	case slices.ContainsFunc(r.Confidence, func(f float32) bool { return !finite(f) }):
		return "a confidence is not a finite number"
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

// RegionsText is the text of an image's recognized regions as one text,
// the way every stage and the API read it: each region's text in reading
// order, each followed by a newline; regions without text add nothing.
// Its offsets are those word timestamps use (code points).
type RegionsText struct {
	b   strings.Builder
	n   int // code points so far
	idx []RegionSpan
}

// RegionSpan is where one region's text lies in a RegionsText: code
// points [Start, End).
type RegionSpan struct {
	Index      int
	Start, End int
}

// Add appends the texts of rs, which come after those added before in
// reading order, and returns the text they add.
func (t *RegionsText) Add(rs []Region) string {
	start := t.b.Len()
	for _, r := range rs {
		if r.Text == "" {
			continue
		}
		n := utf8.RuneCountInString(r.Text)
		t.idx = append(t.idx, RegionSpan{Index: r.Index, Start: t.n, End: t.n + n})
		t.b.WriteString(r.Text)
		t.b.WriteByte('\n')
		t.n += n + 1
	}
	return t.b.String()[start:]
}

// String returns the text so far.
func (t *RegionsText) String() string { return t.b.String() }

// Spans returns where each region's text lies, in the order added.
func (t *RegionsText) Spans() []RegionSpan { return t.idx }
