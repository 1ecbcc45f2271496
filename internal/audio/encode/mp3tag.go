package encode

// The Info tag frame of an mp3 file: whether LAME writes one, and its size.

const (
	// lameExtLen is the length of the LAME extension of an Info tag, from
	// its encoder string to its CRC.
	lameExtLen = 36
	// lameTagLen is what LAME needs in its tag frame after the side
	// information: the Xing fields with a 100-byte table of contents, and
	// the LAME extension. LAME writes no tag in a smaller frame.
	lameTagLen = 120 + lameExtLen
	// mp3MaxFrame is the largest MPEG audio frame LAME writes.
	mp3MaxFrame = 2880
)

// mp3Params are the parameters LAME picks for a stream, which Lead and the
// tag frame depend on.
type mp3Params struct {
	outRate  int // the rate the stream carries
	kbps     int // its constant bitrate
	delay    int // LAME's encoder delay, in samples at outRate
	tagBytes int // the size of LAME's tag frame in a file, 0 when it writes none
}

// mp3TagBytes returns the size of the frame LAME reserves for its tag at
// outRate Hz and kbps kbit/s, or 0 when the tag does not fit (a frame
// has no room for it below 40 kbit/s at 16 kHz, 64 kbit/s at 24 and 48
// kHz).
func mp3TagBytes(outRate, kbps int) int {
	n := mp3SamplesPerFrame(outRate) / 8 * kbps * 1000 / outRate
	if n < 4+mp3SideInfo(outRate)+lameTagLen || n > mp3MaxFrame {
		return 0
	}
	return n
}

// mp3SamplesPerFrame is the length of an MPEG Layer III frame: 1152
// samples in MPEG-1 (32 to 48 kHz), 576 in MPEG-2 and 2.5.
func mp3SamplesPerFrame(outRate int) int {
	if outRate >= 32000 {
		return 1152
	}
	return 576
}

// mp3SideInfo is the length of a mono frame's side information.
func mp3SideInfo(outRate int) int {
	if outRate >= 32000 {
		return 17
	}
	return 9
}
