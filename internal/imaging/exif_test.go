package imaging

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"testing"
)

// withOrientation returns the JPEG j with an EXIF segment saying
// orientation o, in byte order order, right after its SOI marker.
func withOrientation(j []byte, o uint16, order binary.ByteOrder) []byte {
	var tiff bytes.Buffer
	if order == binary.LittleEndian {
		tiff.WriteString("II")
	} else {
		tiff.WriteString("MM")
	}
	binary.Write(&tiff, order, uint16(42))
	binary.Write(&tiff, order, uint32(8)) // IFD0 right after the header
	binary.Write(&tiff, order, uint16(2)) // two entries: another tag, then Orientation
	for _, e := range [][3]uint16{{0x010f, 2, 0}, {0x0112, 3, o}} {
		binary.Write(&tiff, order, e[0])
		binary.Write(&tiff, order, e[1])
		binary.Write(&tiff, order, uint32(1))
		binary.Write(&tiff, order, e[2])
		binary.Write(&tiff, order, uint16(0))
	}
	binary.Write(&tiff, order, uint32(0))
	seg := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	var out bytes.Buffer
	out.Write(j[:2])
	out.Write([]byte{0xff, 0xe1})
	binary.Write(&out, binary.BigEndian, uint16(len(seg)+2))
	out.Write(seg)
	out.Write(j[2:])
	return out.Bytes()
}

func TestExifOrientation(t *testing.T) {
	// Stored 32×16: red left half, blue right half, a green top-left
	// quarter of the red half.
	stored := image.NewNRGBA(image.Rect(0, 0, 32, 16))
	for y := range 16 {
		for x := range 32 {
			c := color.NRGBA{255, 0, 0, 255}
			switch {
			case x >= 16:
				c = color.NRGBA{0, 0, 255, 255}
			case x < 8 && y < 8:
				c = color.NRGBA{0, 255, 0, 255}
			}
			stored.SetNRGBA(x, y, c)
		}
	}
	j := encodeJPEG(t, stored)
	green, blue := [3]int{0, 255, 0}, [3]int{0, 0, 255}
	tests := []struct {
		o         uint16
		w, h      int
		tl, far   [3]int // the shown top-left pixel, and the far corner's
		farCorner [2]int
	}{
		{1, 32, 16, green, blue, [2]int{31, 15}},
		{2, 32, 16, blue, [3]int{255, 0, 0}, [2]int{31, 15}}, // mirrored
		{3, 32, 16, blue, green, [2]int{31, 15}},
		{4, 32, 16, [3]int{255, 0, 0}, blue, [2]int{31, 15}}, // flipped
		{5, 16, 32, green, blue, [2]int{15, 31}},
		{6, 16, 32, [3]int{255, 0, 0}, blue, [2]int{15, 31}}, // turned clockwise: the stored bottom-left shows top-left
		{7, 16, 32, blue, green, [2]int{15, 31}},
		{8, 16, 32, blue, [3]int{255, 0, 0}, [2]int{15, 31}}, // counter-clockwise: the stored top-right
	}
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, tt := range tests {
			b := withOrientation(j, tt.o, order)
			if got := jpegOrientation(b); got != int(tt.o) {
				t.Fatalf("orientation %d (%v): read %d", tt.o, order, got)
			}
			m, err := Decode(b, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if m.Width != tt.w || m.Height != tt.h {
				t.Fatalf("orientation %d: %d×%d; want %d×%d", tt.o, m.Width, m.Height, tt.w, tt.h)
			}
			near := func(x, y int, want [3]int) bool {
				i := 3 * (y*m.Width + x)
				for c := range 3 {
					if abs(int(m.Pix[i+c])-want[c]) > 40 {
						return false
					}
				}
				return true
			}
			if !near(1, 1, tt.tl) || !near(tt.farCorner[0]-1, tt.farCorner[1]-1, tt.far) {
				t.Errorf("orientation %d: corners %v and %v; want %v and %v", tt.o,
					m.Pix[3*(m.Width+1):3*(m.Width+1)+3], m.Pix[3*((tt.farCorner[1]-1)*m.Width+tt.farCorner[0]-1):][:3], tt.tl, tt.far)
			}
		}
	}
	// Broken or absent EXIF leaves the pixels as stored.
	for _, b := range [][]byte{j, withOrientation(j, 9, binary.BigEndian), append(j[:2:2], 0xff, 0xe1, 0x00, 0x08, 'E', 'x', 'i', 'f', 0, 0)} {
		if got := jpegOrientation(b); got != 1 {
			t.Errorf("orientation %d; want 1", got)
		}
	}
}
