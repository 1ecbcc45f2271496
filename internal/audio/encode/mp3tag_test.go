package encode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"
)

// infoTag is what an Info tag frame says, read the way ffmpeg and mpg123
// read it.
type infoTag struct {
	flags, frames, bytes uint32
	encoder              string
	delay, padding       int
	crcOK                bool
}

// parseInfoTag reads the Info tag at the start of a mono mp3 at outRate
// Hz, or fails the test if there is none.
func parseInfoTag(t *testing.T, data []byte, outRate int) infoTag {
	t.Helper()
	o := 4 + mp3SideInfo(outRate)
	if len(data) < o+8 || string(data[o:o+4]) != "Info" {
		t.Fatalf("no Info tag: the file starts % x", data[:min(len(data), o+8)])
	}
	var tag infoTag
	o += 4
	tag.flags = binary.BigEndian.Uint32(data[o:])
	o += 4
	if tag.flags&1 != 0 {
		tag.frames = binary.BigEndian.Uint32(data[o:])
		o += 4
	}
	if tag.flags&2 != 0 {
		tag.bytes = binary.BigEndian.Uint32(data[o:])
		o += 4
	}
	if tag.flags&4 != 0 {
		o += 100 // the table of contents
	}
	if tag.flags&8 != 0 {
		o += 4 // the quality
	}
	ext := data[o : o+lameExtLen]
	tag.encoder = string(ext[:9])
	v := int(ext[21])<<16 | int(ext[22])<<8 | int(ext[23])
	tag.delay, tag.padding = v>>12, v&0xFFF
	crcAt := o + lameExtLen - 2
	tag.crcOK = binary.BigEndian.Uint16(data[crcAt:]) == crc16(data[:crcAt])
	return tag
}

// hasTag reports whether the first frame of an mp3 at outRate Hz is a
// Xing or Info tag, as decoders look for one.
func hasTag(data []byte, outRate int) bool {
	o := 4 + mp3SideInfo(outRate)
	if len(data) < o+4 {
		return false
	}
	id := string(data[o : o+4])
	return id == "Info" || id == "Xing"
}

// TestMP3Tag checks the first frame of mp3 at the rates and bitrates
// around the tag's limit: a whole file starts with LAME's tag (its length,
// encoder delay and padding, a good CRC), a stream (Options.Stream) with
// audio, and the rest of the file is the stream, byte for byte; New
// without Stream leaves the reserved frame empty, for Whole. A frame too
// small for a tag holds audio in a file too. Lead says the delay where
// there is no tag.
func TestMP3Tag(t *testing.T) {
	for _, tc := range []struct {
		rate, kbps int
		tag        bool
	}{
		{16000, 64, true}, {16000, 40, true}, {16000, 32, false}, {8000, 64, true},
		{11025, 64, true}, {20000, 64, true}, {24000, 64, true}, {24000, 56, false},
		{32000, 64, true}, {44100, 64, true}, {48000, 64, true}, {48000, 56, false},
		{48000, 320, true},
	} {
		t.Run(fmt.Sprintf("%d/%d", tc.rate, tc.kbps), func(t *testing.T) {
			t.Parallel()
			in := testSignal(tc.rate)[:tc.rate]
			opts := Options{Bitrate: tc.kbps * 1000}
			streamOpts := opts
			streamOpts.Stream = true
			whole, err := Whole(MP3, tc.rate, in, opts)
			if err != nil {
				t.Fatal(err)
			}
			stream := encodeAll(t, MP3, tc.rate, in, streamOpts)
			reserved := encodeAll(t, MP3, tc.rate, in, opts)
			out := nextRate(tc.rate, mp3Rates)
			untagged := time.Duration(576+529) * time.Second / time.Duration(out)
			if hasTag(stream, out) {
				t.Errorf("a stream starts with a tag: % x", stream[:4+mp3SideInfo(out)+4])
			}
			if lead := Lead(MP3, tc.rate, streamOpts); lead != untagged {
				t.Errorf("a stream's Lead %v, want %v", lead, untagged)
			}
			lead := Lead(MP3, tc.rate, opts)
			if !tc.tag {
				if hasTag(whole, out) || !bytes.Equal(whole, stream) || !bytes.Equal(reserved, stream) {
					t.Fatal("a tag, or room for one, in a frame too small for LAME's")
				}
				if lead != untagged {
					t.Errorf("Lead %v, want %v", lead, untagged)
				}
				return
			}
			if lead != 0 {
				t.Errorf("Lead %v with a tag, want 0", lead)
			}
			n := mp3TagBytes(out, tc.kbps)
			frames := (len(whole) - n) / n // constant bitrate, no padding slots at these rates
			final := parseInfoTag(t, whole, out)
			t.Logf("LAME's tag %+v", final)
			if !final.crcOK || final.delay != 576 || final.padding < 576 || final.bytes != uint32(len(whole)) ||
				final.encoder != "LAME3.100" || (out%8000 == 0 && final.frames != uint32(frames)) {
				t.Errorf("LAME's tag %+v for %d bytes, %d frames", final, len(whole), frames)
			}
			if !bytes.Equal(whole[n:], stream) {
				t.Errorf("after the tag, the whole file (%d bytes) is not the stream (%d)", len(whole)-n, len(stream))
			}
			if !bytes.Equal(reserved[:4], whole[:4]) || bytes.ContainsFunc(reserved[4:n], func(r rune) bool { return r != 0 }) ||
				!bytes.Equal(reserved[n:], stream) {
				t.Errorf("New without Stream does not leave the tag's frame empty: % x", reserved[:4+mp3SideInfo(out)+8])
			}
		})
	}
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

// TestLead checks Lead against the delays TestDecode measures: none but
// aac's priming, and mp3's delay where it has no tag (a stream, or a
// bitrate too low for one).
func TestLead(t *testing.T) {
	ms := func(samples, rate int) time.Duration {
		return time.Duration(samples) * time.Second / time.Duration(rate)
	}
	for _, tc := range []struct {
		format string
		rate   int
		opts   Options
		want   time.Duration
	}{
		{AAC, 16000, Options{}, 64 * time.Millisecond},
		{AAC, 24000, Options{}, ms(1024, 24000)},
		{AAC, 20000, Options{}, ms(1024, 22050)},
		{AAC, 16000, Options{Bitrate: 32000}, 64 * time.Millisecond},
		{MP3, 16000, Options{}, 0},
		{MP3, 24000, Options{}, 0},
		{MP3, 48000, Options{}, 0},
		{MP3, 16000, Options{Bitrate: 32000}, ms(1105, 16000)},
		{MP3, 16000, Options{Stream: true}, ms(1105, 16000)},
		{MP3, 24000, Options{Stream: true}, ms(1105, 24000)},
		{MP3, 44100, Options{Stream: true}, ms(1105, 44100)},
		{AAC, 16000, Options{Stream: true}, 64 * time.Millisecond},
		{Opus, 16000, Options{Stream: true}, 0},
		{MP3, 20000, Options{Bitrate: 8000}, ms(1105, 22050)},
		{Opus, 16000, Options{}, 0},
		{FLAC, 16000, Options{}, 0},
		{WAV, 16000, Options{}, 0},
		{PCM, 16000, Options{}, 0},
		{"ogg", 16000, Options{}, 0},
		{AAC, 1, Options{}, 0},
		{MP3, 16000, Options{Bitrate: 1}, 0},
	} {
		if got := Lead(tc.format, tc.rate, tc.opts); got != tc.want {
			t.Errorf("Lead(%s, %d, %+v) = %v, want %v", tc.format, tc.rate, tc.opts, got, tc.want)
		}
	}
}

// TestDecodeWithoutTag decodes mp3 at a bitrate too low for the tag: the
// decoders' delay is the Lead.
func TestDecodeWithoutTag(t *testing.T) {
	const rate = 16000
	in := testSignal(rate)
	any := expectation{mp3Frame, func(int) (float64, float64) { return math.Inf(-1), math.Inf(-1) }}
	for _, dec := range decoders[MP3] {
		t.Run(dec.name, func(t *testing.T) {
			t.Parallel()
			checkDecode(t, MP3, rate, in, Options{Bitrate: 32000}, true, dec, any)
		})
	}
}
