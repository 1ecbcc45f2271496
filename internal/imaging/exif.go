package imaging

// A JPEG's EXIF orientation: how a camera says its pixels are to be
// turned for display.

import "encoding/binary"

// jpegOrientation returns the EXIF orientation (1 to 8) of the JPEG file
// b, or 1 (as stored) when it has none or a bad one. It reads the
// segments before the first scan, bounds-checking every offset.
func jpegOrientation(b []byte) int {
	pos := 2 // after SOI
	for pos+4 <= len(b) && b[pos] == 0xff {
		marker := b[pos+1]
		if marker == 0xff { // fill byte
			pos++
			continue
		}
		if marker == 0xda || marker == 0xd9 { // start of scan, end of image
			break
		}
		n := int(binary.BigEndian.Uint16(b[pos+2:]))
		if n < 2 || pos+2+n > len(b) {
			break
		}
		if seg := b[pos+4 : pos+2+n]; marker == 0xe1 && len(seg) > 6 && string(seg[:6]) == "Exif\x00\x00" {
			return tiffOrientation(seg[6:])
		}
		pos += 2 + n
	}
	return 1
}

// tiffOrientation reads the Orientation tag (0x0112) of the first IFD of
// the TIFF structure t, 1 when it has none.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var order binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		order = binary.LittleEndian
	case "MM":
		order = binary.BigEndian
	default:
		return 1
	}
	ifd := int(order.Uint32(t[4:]))
	if ifd < 8 || ifd+2 > len(t) {
		return 1
	}
	count := int(order.Uint16(t[ifd:]))
	for i := range count {
		e := ifd + 2 + 12*i
		if e+12 > len(t) {
			break
		}
		if order.Uint16(t[e:]) == 0x0112 && order.Uint16(t[e+2:]) == 3 { // SHORT
			if o := int(order.Uint16(t[e+8:])); o >= 1 && o <= 8 {
				return o
			}
			return 1
		}
	}
	return 1
}

// orient returns m as EXIF orientation o says to show it: mirrored,
// turned, or both.
func orient(m RGB, o int) RGB {
	if o <= 1 || o > 8 {
		return m
	}
	w, h := m.Width, m.Height
	out := NewRGB(w, h)
	if o >= 5 {
		out = NewRGB(h, w)
	}
	// src maps a pixel of the shown image to the stored one.
	src := [9]func(x, y int) (int, int){
		2: func(x, y int) (int, int) { return w - 1 - x, y },
		3: func(x, y int) (int, int) { return w - 1 - x, h - 1 - y },
		4: func(x, y int) (int, int) { return x, h - 1 - y },
		5: func(x, y int) (int, int) { return y, x },
		6: func(x, y int) (int, int) { return y, h - 1 - x },
		7: func(x, y int) (int, int) { return w - 1 - y, h - 1 - x },
		8: func(x, y int) (int, int) { return w - 1 - y, x },
	}[o]
	for y := range out.Height {
		for x := range out.Width {
			sx, sy := src(x, y)
			copy(out.Pix[3*(y*out.Width+x):], m.Pix[3*(sy*w+sx):3*(sy*w+sx)+3])
		}
	}
	return out
}
