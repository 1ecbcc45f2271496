package imaging

// Turning an image by quarter turns.

// Rotate180 returns m turned 180°.
func Rotate180(m RGB) RGB {
	out := NewRGB(m.Width, m.Height)
	n := m.Width * m.Height
	for i := range n {
		j := n - 1 - i
		copy(out.Pix[3*j:3*j+3], m.Pix[3*i:3*i+3])
	}
	return out
}

// Rotate90 returns m turned 90° counter-clockwise: its top-right corner
// becomes the top-left one.
func Rotate90(m RGB) RGB {
	out := NewRGB(m.Height, m.Width)
	for y := range out.Height {
		sx := m.Width - 1 - y
		for x := range out.Width {
			si := 3 * (x*m.Width + sx)
			di := 3 * (y*out.Width + x)
			copy(out.Pix[di:di+3], m.Pix[si:si+3])
		}
	}
	return out
}
