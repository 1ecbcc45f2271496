package imaging

// Decoding an image file within limits checked on its header.

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"slices"
	"strings"

	"golang.org/x/image/webp"

	"github.com/omnistage/omnistage/internal/engine"
)

// Limits bound what Decode accepts.
type Limits struct {
	// MaxBytes bounds the file's size.
	MaxBytes int
	// MaxPixels bounds width × height, as the header declares them.
	MaxPixels int
}

// DefaultLimits are 32 MiB files and 16 Mpx images: a 12 Mpx phone photo
// fits, and decoding the largest takes 64 MB at most (RGBA) before it is
// made RGB.
var DefaultLimits = Limits{MaxBytes: 32 << 20, MaxPixels: 16_000_000}

type codec struct {
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

var codecs = map[string]codec{
	PNG:  {png.DecodeConfig, png.Decode},
	JPEG: {jpeg.DecodeConfig, jpeg.Decode},
	WebP: {webp.DecodeConfig, webp.Decode},
}

// Header returns what the header of the image file b says of it (its
// format and size as stored, before any EXIF orientation; Bytes is b), or
// an *engine.InputError when b is not an image this package reads, is cut
// short, or passes lim.
func Header(b []byte, lim Limits) (engine.Image, error) {
	if lim.MaxBytes > 0 && len(b) > lim.MaxBytes {
		return engine.Image{}, &engine.InputError{Reason: fmt.Sprintf("the image file is %s; the limit is %s", size(len(b)), size(lim.MaxBytes))}
	}
	format, err := Sniff(b)
	if err != nil {
		return engine.Image{}, err
	}
	cfg, err := codecs[format].config(bytes.NewReader(b))
	if err == png.FormatError("non-positive dimension") {
		cfg, err = image.Config{}, nil // image/png's word for a zero size
	}
	if err != nil {
		return engine.Image{}, formatError(format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return engine.Image{}, &engine.InputError{Reason: "zero-sized image: its " + name(format) + " header declares no pixels"}
	}
	if px := cfg.Width * cfg.Height; lim.MaxPixels > 0 && (px > lim.MaxPixels || px/cfg.Height != cfg.Width) {
		return engine.Image{}, &engine.InputError{Reason: fmt.Sprintf("%d×%d = %s; the limit is %s", cfg.Width, cfg.Height, mpx(px), mpx(lim.MaxPixels))}
	}
	return engine.Image{Format: format, Width: cfg.Width, Height: cfg.Height, Bytes: b}, nil
}

// Decode decodes the image file b into RGB pixels, after Header has
// checked it against lim. Transparent pixels are laid over white, as a
// browser shows them on a page, and a JPEG is turned or mirrored as its
// EXIF orientation says (a phone's photo taken sideways comes out as it
// was held).
func Decode(b []byte, lim Limits) (RGB, error) {
	hdr, err := Header(b, lim)
	if err != nil {
		return RGB{}, err
	}
	img, err := codecs[hdr.Format].decode(bytes.NewReader(b))
	if err != nil {
		return RGB{}, formatError(hdr.Format, err)
	}
	if r := img.Bounds(); r.Dx() != hdr.Width || r.Dy() != hdr.Height {
		return RGB{}, &engine.InputError{Reason: fmt.Sprintf("bad %s: the header says %d×%d, the pixels are %d×%d", name(hdr.Format), hdr.Width, hdr.Height, r.Dx(), r.Dy())}
	}
	m := toRGB(img, hdr.Format == WebP)
	if hdr.Format == JPEG {
		m = orient(m, jpegOrientation(b))
	}
	return m, nil
}

// truncation are the decoders' words for data that ends early, besides
// io.ErrUnexpectedEOF: image/png's when the pixel data stops, image/jpeg's
// when a scan does, golang.org/x/image/riff's when a chunk does.
var truncation = []string{"not enough pixel data", "short Huffman data", "riff: short chunk header", "riff: short chunk data"}

// formatError turns a decoder's error into an *engine.InputError.
func formatError(format string, err error) error {
	msg := err.Error()
	var pngErr png.FormatError
	var jpegErr jpeg.FormatError
	switch {
	case errors.As(err, &pngErr):
		msg = string(pngErr)
	case errors.As(err, &jpegErr):
		msg = string(jpegErr)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || slices.Contains(truncation, msg) {
		return &engine.InputError{Reason: "truncated " + name(format) + ": the file ends early"}
	}
	// The other decoders' messages start with their package's name
	// ("riff: ...", "vp8: ...").
	if i := strings.Index(msg, ": "); i > 0 && !strings.Contains(msg[:i], " ") {
		msg = msg[i+2:]
	}
	return &engine.InputError{Reason: fmt.Sprintf("bad %s: %s", name(format), msg)}
}

// name is a format as people write it.
func name(format string) string {
	if format == WebP {
		return "WebP"
	}
	return strings.ToUpper(format)
}

// mpx writes a pixel count in megapixels: "20 Mpx", "16.8 Mpx", or in
// pixels below one.
func mpx(n int) string {
	if n < 1_000_000 {
		return fmt.Sprintf("%d pixels", n)
	}
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%d Mpx", n/1_000_000)
	}
	return fmt.Sprintf("%.1f Mpx", float64(n)/1e6)
}

// size writes a byte count: "32 MiB", "40.5 MiB", "900 bytes".
func size(n int) string {
	const mb = 1 << 20
	switch {
	case n%mb == 0:
		return fmt.Sprintf("%d MiB", n/mb)
	case n >= mb/10:
		return fmt.Sprintf("%.1f MiB", float64(n)/mb)
	}
	return fmt.Sprintf("%d bytes", n)
}
