package payload

import (
	"encoding/base64"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/omnistage/omnistage/internal/engine"
)

// encoded returns e as an unsigned stage_input string.
func encoded(t *testing.T, e *Envelope) string {
	t.Helper()
	s, err := NewCodec(nil).Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decodeInParts decodes s with a Decoder, written in parts whose lengths
// rng picks (1 to max characters).
func decodeInParts(c *Codec, s string, want Expect, rng *rand.Rand, maxPart int) (*Envelope, *Decoder, error) {
	d := c.NewDecoder(len(s))
	for len(s) > 0 {
		n := min(len(s), 1+rng.IntN(maxPart))
		if _, err := d.Write([]byte(s[:n])); err != nil {
			return nil, d, err
		}
		s = s[n:]
	}
	e, err := d.Decode(want)
	return e, d, err
}

// TestDecoderParts: a string written in parts of any length decodes to
// what Decode gives for the whole, valid or not, signed or not; and the
// envelope's chunk data lie in the buffer the string was decoded into,
// aligned, whatever their place in it (requests ids of 1 to 4 bytes move
// the data by a byte at a time).
func TestDecoderParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, key := range [][]byte{nil, testKey} {
		c := NewCodec(key)
		for _, id := range []string{"r", "r2", "r23", "r234"} {
			for _, data := range [][]engine.Chunk{
				{audioChunk(1000), audioChunk(7)},
				{framesChunk(40, 26, 5)},
				{segmentsChunk()},
				{dataChunk("blob", "some bytes", nil)},
				{textChunk("hi")},
			} {
				e := base(data...)
				e.RequestID = id
				s, err := c.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				whole, err := c.Decode(s, expect(1))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(whole, e) {
					t.Fatalf("Decode changed the envelope:\n%+v\n%+v", whole, e)
				}
				for _, maxPart := range []int{1, 3, 5, 64, len(s)} {
					got, d, err := decodeInParts(c, s, expect(1), rng, maxPart)
					if err != nil {
						t.Fatalf("parts of up to %d: %v", maxPart, err)
					}
					if !reflect.DeepEqual(got, e) {
						t.Fatalf("parts of up to %d: %+v, want %+v", maxPart, got, e)
					}
					checkInPlace(t, got, d.bin)
				}
			}
		}
	}
	// Bad strings fail alike, whole and in parts.
	good := encoded(t, base(audioChunk(300)))
	for _, s := range []string{
		good[:len(good)-1] + "!", good[:100] + "+" + good[101:], good[:50] + "\n" + good[50:],
		good[:10] + "\r" + good[10:], good[:len(good)-1], good[:len(good)-2], good[:5], "", good + "A",
	} {
		_, want := NewCodec(nil).Decode(s, expect(1))
		for _, maxPart := range []int{1, 4, 7, len(s) + 1} {
			_, _, err := decodeInParts(NewCodec(nil), s, expect(1), rng, maxPart)
			if codeOf(err) != codeOf(want) {
				t.Errorf("%.20q… in parts of up to %d: %v; whole: %v", s, maxPart, err, want)
			}
		}
	}
}

// checkInPlace checks that every numeric slice of e's data lies in buf,
// at an address its element's size divides.
func checkInPlace(t *testing.T, e *Envelope, buf []byte) {
	t.Helper()
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	hi := lo + uintptr(cap(buf))
	in := func(what string, p unsafe.Pointer, n, size int) {
		if n == 0 {
			return
		}
		a := uintptr(p)
		if a < lo || a+uintptr(n*size) > hi {
			t.Errorf("%s is not in the decoded buffer", what)
		}
		if a%uintptr(size) != 0 {
			t.Errorf("%s is at a misaligned address", what)
		}
	}
	for _, c := range e.Data {
		switch {
		case c.Audio != nil:
			in("audio samples", unsafe.Pointer(unsafe.SliceData(c.Audio.Samples)), len(c.Audio.Samples), 2)
		case c.Frames != nil:
			in("frame params", unsafe.Pointer(unsafe.SliceData(c.Frames.Params)), len(c.Frames.Params), 4)
			in("frame strengths", unsafe.Pointer(unsafe.SliceData(c.Frames.Str)), len(c.Frames.Str), 4)
		case c.Segments != nil:
			in("segment ends", unsafe.Pointer(unsafe.SliceData(c.Segments.Ends)), len(c.Segments.Ends), 4)
			in("segment targets", unsafe.Pointer(unsafe.SliceData(c.Segments.TargetF0)), len(c.Segments.TargetF0), 4)
		case c.Data != nil:
			in("data bytes", unsafe.Pointer(unsafe.SliceData(c.Data.Bytes)), len(c.Data.Bytes), 1)
		}
	}
}

// TestInPlaceFloor: a bin that cannot move down to an aligned address
// without overwriting a bin kept before it is copied out instead, and the
// one kept before is intact.
func TestInPlaceFloor(t *testing.T) {
	buf := make([]byte, 16)
	for i := range buf {
		buf[i] = byte(i)
	}
	var r reader
	r.own(buf)
	first := r.inPlace(buf[0:5], 1) // kept as it is: the floor is now 5
	second := r.inPlace(buf[6:10], 4)
	if &second[0] == &buf[4] || string(second) != "\x06\x07\x08\x09" || string(first) != "\x00\x01\x02\x03\x04" {
		t.Fatalf("first %x, second %x (moved over the first: %v)", first, second, &second[0] == &buf[4])
	}
	third := r.inPlace(buf[13:16], 4) // moves down to 12, above the floor
	if &third[0] != &buf[12] || string(third) != "\x0d\x0e\x0f" {
		t.Fatalf("third %x, at %p, want it moved to %p", third, &third[0], &buf[12])
	}
	var plain reader
	if plain.inPlace(buf[:4], 1) != nil {
		t.Fatal("a reader that does not own its input kept a bin in place")
	}
}

// TestDecoderRefusesEarly: the Write that completes a header that cannot
// be used refuses it, before the rest of the string is decoded: an
// unsigned payload for a keyed codec, one signed with another key, and
// bytes that are not a payload; so does the Write that takes a string past
// the size limit.
func TestDecoderRefusesEarly(t *testing.T) {
	rest := strings.Repeat("A", 1<<16)
	signed := NewCodec(testKey)
	other, err := NewCodec([]byte("another key, 32 bytes long......")).Encode(base(textChunk("x")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, head, code string
		c                *Codec
	}{
		{"unsigned", encoded(t, base(textChunk("x"))), CodeSignatureMissing, signed},
		{"another key", other, CodeKeyUnknown, signed},
		{"not a payload", base64.RawURLEncoding.EncodeToString([]byte("PNG\x00 not a payload at all, no")), CodeBadMagic, signed},
		{"too large", encoded(t, base(textChunk("x"))), CodeTooLarge, NewCodec(nil, WithMaxSize(1<<15))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.c.NewDecoder(0)
			if _, err := d.Write([]byte(tc.head[:headChars-1])); err != nil {
				t.Fatalf("the header's first characters: %v", err)
			}
			_, err := d.Write([]byte(tc.head[headChars-1:headChars] + rest))
			if codeOf(err) != tc.code {
				t.Fatalf("the Write that completes the header: %v, want %s", err, tc.code)
			}
			if d.bin != nil && len(d.bin) > headerLen+2 {
				t.Fatalf("%d bytes decoded before the refusal", len(d.bin))
			}
			if _, err2 := d.Write([]byte("AAAA")); err2 != err {
				t.Fatalf("a Write after the refusal: %v, want %v", err2, err)
			}
			if _, err2 := d.Decode(expect(1)); err2 != err {
				t.Fatalf("Decode after the refusal: %v, want %v", err2, err)
			}
		})
	}
}
