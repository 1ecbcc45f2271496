package encode

// The Info tag of a streamed mp3: a first frame that tells decoders
// LAME's encoder delay before the stream's length is known.

import (
	"encoding/binary"
	"fmt"
)

// mp3StreamFrames is the frame count a streamed mp3's Info tag gives, as
// the stream's length is not known when the tag goes out: ffmpeg and
// mpg123 skip the encoder delay only in a tag that has a frame count
// (without one, ffmpeg decodes the tag frame as 576 samples of silence and
// mpg123 ignores the delay). It is 2^30/1152, the most frames mpg123 takes
// as a length on 32-bit systems (it ignores larger counts as endless):
// 9.3 hours at 16 kHz, 6.2 at 24 and 48 kHz, longer than any response. A
// decoder ends at the stream's real end; a player that shows the tag's
// length (Chromium's audio element does) shows this one.
const mp3StreamFrames = (1 << 30) / 1152

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

// mp3Params are the parameters of a LAME stream that its tag states.
type mp3Params struct {
	outRate  int    // the rate the stream carries
	kbps     int    // its constant bitrate
	delay    int    // LAME's encoder delay, in samples at outRate
	lowpass  int    // LAME's lowpass filter, in Hz
	encoder  string // LAME's short version string, such as "LAME3.100"
	tagBytes int    // the size of LAME's tag frame, 0 when it writes none
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

// Layer III bitrates (kbit/s) by bitrate index, for MPEG-1 and for
// MPEG-2 and 2.5; and the sample rates by sampling frequency index, for
// MPEG-1, 2 and 2.5.
var (
	mp3Bitrates = [2][15]int{
		{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320},
		{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
	}
	mp3RateIndex = [3][3]int{{44100, 48000, 32000}, {22050, 24000, 16000}, {11025, 12000, 8000}}
)

// mp3Header returns the 4-byte header of a mono Layer III frame of p,
// without CRC or padding, marked original as LAME marks its frames.
func mp3Header(p mp3Params) ([4]byte, error) {
	var h [4]byte
	version, table, versionBits := 0, 0, byte(3) // MPEG-1
	switch {
	case p.outRate < 16000:
		version, table, versionBits = 2, 1, 0 // MPEG-2.5
	case p.outRate < 32000:
		version, table, versionBits = 1, 1, 2 // MPEG-2
	}
	rateIndex, brIndex := -1, -1
	for i, r := range mp3RateIndex[version] {
		if r == p.outRate {
			rateIndex = i
		}
	}
	for i, b := range mp3Bitrates[table] {
		if i > 0 && b == p.kbps {
			brIndex = i
		}
	}
	if rateIndex < 0 || brIndex < 0 {
		return h, fmt.Errorf("encode: mp3: no Layer III header for %d Hz at %d kbit/s", p.outRate, p.kbps)
	}
	h[0] = 0xFF
	h[1] = 0xE0 | versionBits<<3 | 1<<1 | 1 // layer III, no CRC
	h[2] = byte(brIndex<<4 | rateIndex<<2)
	h[3] = 3<<6 | 1<<2 // mono, original
	return h, nil
}

// mp3StreamTag returns the Info tag frame of a stream of p whose length is
// not known yet: LAME's frame size and layout (the Xing "Info" of a
// constant-bitrate stream, then the LAME extension with the encoder delay)
// with mp3StreamFrames frames and, as the stream's end is not known, no
// byte count, table of contents, padding, music length or music CRC. The
// tag's CRC is set, as decoders may check it.
func mp3StreamTag(p mp3Params) ([]byte, error) {
	if p.tagBytes == 0 {
		return nil, nil
	}
	h, err := mp3Header(p)
	if err != nil {
		return nil, err
	}
	t := make([]byte, p.tagBytes)
	copy(t, h[:])
	o := 4 + mp3SideInfo(p.outRate) // the side information stays zero
	o += copy(t[o:], "Info")
	binary.BigEndian.PutUint32(t[o:], 1) // flags: the frame count only
	binary.BigEndian.PutUint32(t[o+4:], mp3StreamFrames)
	o += 8
	ext := t[o : o+lameExtLen]
	copy(ext[:9], fmt.Sprintf("%-9.9s", p.encoder))
	ext[9] = 1 // tag revision 0, constant bitrate
	ext[10] = byte(min(255, (p.lowpass+50)/100))
	ext[20] = byte(min(255, p.kbps))
	// 12 bits of encoder delay and 12 of padding, which is unknown: 0.
	ext[21] = byte(p.delay >> 4)
	ext[22] = byte(p.delay << 4)
	crcAt := o + lameExtLen - 2
	binary.BigEndian.PutUint16(t[crcAt:], crc16(t[:crcAt]))
	return t, nil
}

// crc16 is the CRC of the LAME tag: CRC-16 with polynomial 0x8005,
// reflected (0xA001), starting from 0.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}
