package engine

// The kinds of images and the text found in them.

import (
	"strings"
	"unicode/utf8"
)

// Image is an encoded image: the bytes of a PNG, JPEG or WebP file, and
// what its header says of it.
type Image struct {
	// Format is "png", "jpeg" or "webp".
	Format        string
	Width, Height int
	Bytes         []byte
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
