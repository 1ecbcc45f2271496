// Package imaging reads the images omnistage takes (PNG, JPEG and WebP
// files) into RGB pixels, and turns and flips them.
//
// A file's format is sniffed from its first bytes, never taken from a name,
// and its header is read (image.DecodeConfig) and checked against Limits
// before any pixel is decoded, so that a small file that declares a huge
// image costs nothing. Every refusal is an *engine.InputError that says
// what to change: "not an image", "truncated PNG", "4000×5000 = 20 Mpx; the
// limit is 16 Mpx", "zero-sized image".
//
// A JPEG is turned or mirrored as its EXIF orientation says, as browsers
// and OpenCV's imread show it.
//
// Decoding uses Go's image/png and image/jpeg and golang.org/x/image/webp:
// pure Go, bounded by the header check, with nothing to install. The image
// operations OCR needs beyond these (resizing, perspective crops, contours,
// polygon offsets) are OpenCV's and Clipper's, bound in the subpackage cv.
package imaging

import "github.com/omnistage/omnistage/internal/engine"

// RGB is an image of 8-bit RGB pixels, row-major, 3 bytes a pixel and
// 3*Width bytes a row, without padding.
type RGB struct {
	Width, Height int
	Pix           []byte
}

// NewRGB returns a black w×h image.
func NewRGB(w, h int) RGB {
	return RGB{Width: w, Height: h, Pix: make([]byte, 3*w*h)}
}

// Crop returns the image as an engine.Crop sharing its pixels.
func (m RGB) Crop() *engine.Crop {
	return &engine.Crop{Width: m.Width, Height: m.Height, Pixels: m.Pix}
}

// FromCrop returns c as an RGB image sharing its pixels.
func FromCrop(c *engine.Crop) RGB {
	return RGB{Width: c.Width, Height: c.Height, Pix: c.Pixels}
}
