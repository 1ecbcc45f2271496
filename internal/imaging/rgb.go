package imaging

// Converting a decoded image.Image to RGB pixels.

import (
	"image"
	"image/color"
)

// toRGB converts img to RGB, laying transparent pixels over white. The
// decoders' usual types take a direct path; others go through color.Model.
// studio says img's Y'CbCr pixels are of limited range (Y' 16 to 235), as
// VP8 (lossy WebP) makes them, where image.YCbCr assumes JPEG's full
// range (golang.org/x/image/webp returns them as they are: Go issue 40173).
func toRGB(img image.Image, studio bool) RGB {
	r := img.Bounds()
	out := NewRGB(r.Dx(), r.Dy())
	switch src := img.(type) {
	case *image.YCbCr:
		if studio {
			fromStudio(out, src, nil)
		} else {
			fromYCbCr(out, src)
		}
	case *image.NYCbCrA:
		if studio {
			fromStudio(out, &src.YCbCr, src.A)
		} else {
			fromAny(out, img)
		}
	case *image.NRGBA:
		for y := range out.Height {
			row := src.Pix[(y+r.Min.Y-src.Rect.Min.Y)*src.Stride+(r.Min.X-src.Rect.Min.X)*4:]
			dst := out.Pix[y*3*out.Width:]
			for x := range out.Width {
				a := uint32(row[4*x+3])
				for c := range 3 {
					dst[3*x+c] = uint8((uint32(row[4*x+c])*a + 255*(255-a) + 127) / 255)
				}
			}
		}
	case *image.RGBA:
		for y := range out.Height {
			row := src.Pix[(y+r.Min.Y-src.Rect.Min.Y)*src.Stride+(r.Min.X-src.Rect.Min.X)*4:]
			dst := out.Pix[y*3*out.Width:]
			for x := range out.Width {
				a := row[4*x+3]
				for c := range 3 {
					dst[3*x+c] = row[4*x+c] + (255 - a) // premultiplied
				}
			}
		}
	case *image.Gray:
		for y := range out.Height {
			row := src.Pix[(y+r.Min.Y-src.Rect.Min.Y)*src.Stride+(r.Min.X-src.Rect.Min.X):]
			dst := out.Pix[y*3*out.Width:]
			for x := range out.Width {
				dst[3*x], dst[3*x+1], dst[3*x+2] = row[x], row[x], row[x]
			}
		}
	default:
		fromAny(out, img)
	}
	return out
}

func fromYCbCr(out RGB, src *image.YCbCr) {
	r := src.Rect
	for y := range out.Height {
		dst := out.Pix[y*3*out.Width:]
		for x := range out.Width {
			yi := src.YOffset(x+r.Min.X, y+r.Min.Y)
			ci := src.COffset(x+r.Min.X, y+r.Min.Y)
			dst[3*x], dst[3*x+1], dst[3*x+2] = color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
		}
	}
}

// fromStudio converts limited-range BT.601 Y'CbCr, with alpha when a is
// not nil, in 8.8 fixed point.
func fromStudio(out RGB, src *image.YCbCr, a []byte) {
	r := src.Rect
	for y := range out.Height {
		dst := out.Pix[y*3*out.Width:]
		for x := range out.Width {
			yi := src.YOffset(x+r.Min.X, y+r.Min.Y)
			ci := src.COffset(x+r.Min.X, y+r.Min.Y)
			l := 298 * (int32(src.Y[yi]) - 16)
			cb, cr := int32(src.Cb[ci])-128, int32(src.Cr[ci])-128
			rgb := [3]int32{
				(l + 409*cr + 128) >> 8,
				(l - 100*cb - 208*cr + 128) >> 8,
				(l + 516*cb + 128) >> 8,
			}
			alpha := int32(255)
			if a != nil {
				alpha = int32(a[yi])
			}
			for c, v := range rgb {
				v = min(max(v, 0), 255)
				dst[3*x+c] = uint8((v*alpha + 255*(255-alpha) + 127) / 255)
			}
		}
	}
}

// fromAny converts any image through its colour model, pixel by pixel.
func fromAny(out RGB, img image.Image) {
	r := img.Bounds()
	for y := range out.Height {
		dst := out.Pix[y*3*out.Width:]
		for x := range out.Width {
			cr, cg, cb, ca := img.At(x+r.Min.X, y+r.Min.Y).RGBA() // premultiplied, 16 bits
			white := 0xffff - ca
			dst[3*x] = uint8((cr + white) >> 8)
			dst[3*x+1] = uint8((cg + white) >> 8)
			dst[3*x+2] = uint8((cb + white) >> 8)
		}
	}
}
