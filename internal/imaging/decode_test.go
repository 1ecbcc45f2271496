package imaging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// pngHeader returns a PNG signature and an IHDR chunk declaring w×h 8-bit
// RGB, with a right checksum, and nothing after it.
func pngHeader(w, h uint32) []byte {
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	chunk := append([]byte("IHDR"), ihdr[:]...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// picture is a small test image with every channel varying.
func picture(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x + y) % 256), 255})
		}
	}
	return m
}

func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeRefuses(t *testing.T) {
	goodPNG := encodePNG(t, picture(40, 30))
	goodJPEG := encodeJPEG(t, picture(40, 30))
	webp := readTestdata(t, "testsrc.lossy.webp")
	tests := []struct {
		name string
		b    []byte
		lim  Limits
		want string // the reason starts with it
	}{
		{"empty", nil, DefaultLimits, "not an image: no bytes"},
		{"text", []byte("hello, world"), DefaultLimits, "not an image: the bytes are not"},
		{"gif", []byte("GIF89a\x01\x00\x01\x00"), DefaultLimits, "a GIF file; send a PNG, JPEG or WebP image"},
		{"pdf", []byte("%PDF-1.7\n"), DefaultLimits, "a PDF file"},
		{"heic", []byte("\x00\x00\x00\x18ftypheic"), DefaultLimits, "a HEIF or AVIF file"},
		{"png signature only", goodPNG[:8], DefaultLimits, "truncated PNG"},
		{"png header only", pngHeader(40, 30), DefaultLimits, "truncated PNG"},
		{"png cut in the pixels", goodPNG[:len(goodPNG)/2], DefaultLimits, "truncated PNG"},
		{"png bad checksum", append(pngHeader(40, 30)[:29], 0, 0, 0, 0), DefaultLimits, "bad PNG: invalid checksum"},
		{"png zero width", pngHeader(0, 30), DefaultLimits, "zero-sized image"},
		{"png huge header", pngHeader(100000, 100000), DefaultLimits, "100000×100000 = 10000 Mpx; the limit is 16 Mpx"},
		{"png 20 Mpx", pngHeader(4000, 5000), DefaultLimits, "4000×5000 = 20 Mpx; the limit is 16 Mpx"},
		{"png over a small limit", goodPNG, Limits{MaxPixels: 1000}, "40×30 = 1200 pixels"},
		{"png too many bytes", goodPNG, Limits{MaxBytes: 100}, "the image file is"},
		{"jpeg marker only", goodJPEG[:3], DefaultLimits, "truncated JPEG"},
		{"jpeg cut in the scan", goodJPEG[:len(goodJPEG)-200], DefaultLimits, "truncated JPEG"},
		{"jpeg garbage after the marker", []byte("\xff\xd8\xffnot really"), DefaultLimits, "bad JPEG"},
		{"webp cut", webp[:40], DefaultLimits, "truncated WebP"},
		{"webp riff only", []byte("RIFF\x10\x00\x00\x00WEBP"), DefaultLimits, "truncated WebP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.b, tt.lim)
			var ie *engine.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("Decode: %v; want an *engine.InputError", err)
			}
			if !strings.HasPrefix(ie.Reason, tt.want) {
				t.Errorf("reason %q; want it to start with %q", ie.Reason, tt.want)
			}
		})
	}
}

func TestDecodeFormats(t *testing.T) {
	src := picture(40, 30)
	want := toRGB(src, false)
	tests := []struct {
		name   string
		b      []byte
		format string
		// tol is how far a channel may be from src's (lossy formats).
		tol int
	}{
		{"png", encodePNG(t, src), PNG, 0},
		{"jpeg", encodeJPEG(t, src), JPEG, 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr, err := Header(tt.b, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Format != tt.format || hdr.Width != 40 || hdr.Height != 30 {
				t.Errorf("Header: %s %d×%d; want %s 40×30", hdr.Format, hdr.Width, hdr.Height, tt.format)
			}
			got, err := Decode(tt.b, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got, want); d > tt.tol {
				t.Errorf("a channel is %d from the original; want at most %d", d, tt.tol)
			}
		})
	}
}

// TestDecodeWebP checks the WebP files ffmpeg made of its test pattern
// (testdata/README) against the PNG it made of the same frame.
func TestDecodeWebP(t *testing.T) {
	want, err := Decode(readTestdata(t, "testsrc.png"), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file string
		tol  int
	}{{"testsrc.lossless.webp", 0}, {"testsrc.lossy.webp", 255}} {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Decode(readTestdata(t, tt.file), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got.Width != 64 || got.Height != 48 {
				t.Fatalf("%d×%d; want 64×48", got.Width, got.Height)
			}
			if d := maxDiff(got, want); d > tt.tol {
				t.Errorf("a channel is %d from the PNG's; want at most %d", d, tt.tol)
			}
			// Read as full-range Y'CbCr the lossy file is 20 from the PNG.
			if d := meanDiff(got, want); d > 8 {
				t.Errorf("channels are %.1f from the PNG's on average; want at most 8", d)
			}
		})
	}
}

// TestDecodeWebPAlpha checks a lossless WebP at half opacity comes out
// halfway between its colours and white.
func TestDecodeWebPAlpha(t *testing.T) {
	opaque, err := Decode(readTestdata(t, "testsrc.png"), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(readTestdata(t, "testsrc.alpha.webp"), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got.Pix {
		if want := (int(opaque.Pix[i]) + 255) / 2; abs(int(v)-want) > 2 {
			t.Fatalf("byte %d is %d; want %d (±2)", i, v, want)
		}
	}
}

// TestTransparentOverWhite checks that transparent pixels come out white
// and half-transparent ones halfway to white, for each pixel layout the
// decoders produce.
func TestTransparentOverWhite(t *testing.T) {
	nrgba := image.NewNRGBA(image.Rect(0, 0, 3, 1))
	nrgba.SetNRGBA(0, 0, color.NRGBA{0, 0, 0, 0})
	nrgba.SetNRGBA(1, 0, color.NRGBA{0, 0, 0, 128})
	nrgba.SetNRGBA(2, 0, color.NRGBA{10, 20, 30, 255})
	rgba := image.NewRGBA(nrgba.Rect)
	paletted := image.NewPaletted(nrgba.Rect, color.Palette{color.NRGBA{0, 0, 0, 0}, color.NRGBA{0, 0, 0, 128}, color.NRGBA{10, 20, 30, 255}})
	for x := range 3 {
		rgba.Set(x, 0, nrgba.At(x, 0))
		paletted.SetColorIndex(x, 0, uint8(x))
	}
	want := []byte{255, 255, 255, 127, 127, 127, 10, 20, 30}
	for _, tt := range []struct {
		name string
		img  image.Image
	}{{"nrgba", nrgba}, {"rgba", rgba}, {"paletted", paletted}} {
		t.Run(tt.name, func(t *testing.T) {
			got := toRGB(tt.img, false).Pix
			for i := range want {
				if d := int(got[i]) - int(want[i]); d < -1 || d > 1 {
					t.Fatalf("pixels %v; want %v (±1)", got, want)
				}
			}
		})
	}
	// The same through a file: a PNG with alpha.
	got, err := Decode(encodePNG(t, nrgba), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pix[0] != 255 || got.Pix[6] != 10 {
		t.Errorf("decoded pixels %v; want %v", got.Pix, want)
	}
}

func TestRotate(t *testing.T) {
	m := RGB{Width: 3, Height: 2, Pix: []byte{
		1, 1, 1, 2, 2, 2, 3, 3, 3,
		4, 4, 4, 5, 5, 5, 6, 6, 6,
	}}
	gray := func(m RGB) []byte {
		out := make([]byte, m.Width*m.Height)
		for i := range out {
			out[i] = m.Pix[3*i]
		}
		return out
	}
	if got := Rotate180(m); got.Width != 3 || got.Height != 2 || !bytes.Equal(gray(got), []byte{6, 5, 4, 3, 2, 1}) {
		t.Errorf("Rotate180: %d×%d %v", got.Width, got.Height, gray(got))
	}
	// Counter-clockwise: the top-right pixel (3) becomes the top-left.
	if got := Rotate90(m); got.Width != 2 || got.Height != 3 || !bytes.Equal(gray(got), []byte{3, 6, 2, 5, 1, 4}) {
		t.Errorf("Rotate90: %d×%d %v", got.Width, got.Height, gray(got))
	}
}

func maxDiff(a, b RGB) int {
	d := 0
	for i := range a.Pix {
		d = max(d, abs(int(a.Pix[i])-int(b.Pix[i])))
	}
	return d
}

func meanDiff(a, b RGB) float64 {
	s := 0
	for i := range a.Pix {
		s += abs(int(a.Pix[i]) - int(b.Pix[i]))
	}
	return float64(s) / float64(len(a.Pix))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// FuzzDecode checks that no bytes make Decode panic, that every refusal is
// an *engine.InputError, and that what it accepts is within the limits.
func FuzzDecode(f *testing.F) {
	small := picture(12, 9)
	for _, b := range [][]byte{
		encodePNG(f, small), encodeJPEG(f, small), readTestdata(f, "testsrc.lossy.webp"),
		readTestdata(f, "testsrc.lossless.webp"), readTestdata(f, "testsrc.alpha.webp"),
		pngHeader(3000, 3000), pngHeader(0, 1), nil, []byte("GIF89a"),
		withOrientation(encodeJPEG(f, small), 6, binary.BigEndian),
	} {
		f.Add(b)
		if len(b) > 20 {
			f.Add(b[:len(b)/2])
		}
	}
	lim := Limits{MaxBytes: 1 << 16, MaxPixels: 1 << 16}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, lim)
		if err != nil {
			var ie *engine.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("Decode: %v (%T); want an *engine.InputError", err, err)
			}
			return
		}
		if m.Width <= 0 || m.Height <= 0 || m.Width*m.Height > lim.MaxPixels || len(m.Pix) != 3*m.Width*m.Height {
			t.Fatalf("Decode gave %d×%d with %d bytes", m.Width, m.Height, len(m.Pix))
		}
	})
}
