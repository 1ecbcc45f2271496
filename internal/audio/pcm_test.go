package audio

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

func TestPCMBytes(t *testing.T) {
	s := []int16{0, 1, -1, 32767, -32768, 0x1234}
	want := []byte{0, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0x80, 0x34, 0x12}
	if got := PCMBytes(s); !bytes.Equal(got, want) {
		t.Fatalf("PCMBytes = %x, want %x", got, want)
	}
	if got := AppendPCMBytes([]byte("ab"), s); !bytes.Equal(got, append([]byte("ab"), want...)) {
		t.Fatalf("AppendPCMBytes = %x", got)
	}
	back, err := PCMSamples(want)
	if err != nil || !slices.Equal(back, s) {
		t.Fatalf("PCMSamples = %v, %v; want %v", back, err, s)
	}
	back, err = AppendPCMSamples([]int16{7}, want)
	if err != nil || !slices.Equal(back, append([]int16{7}, s...)) {
		t.Fatalf("AppendPCMSamples = %v, %v", back, err)
	}
	if _, err := PCMSamples([]byte{1, 2, 3}); err == nil || err.Error() != "pcm: odd length 3 bytes" {
		t.Errorf("PCMSamples(3 bytes) error = %v", err)
	}
}

func TestAppendPCMBytesDoesNotAllocate(t *testing.T) {
	s := make([]int16, 480)
	dst := make([]byte, 0, 2*len(s))
	if n := testing.AllocsPerRun(100, func() { dst = AppendPCMBytes(dst[:0], s) }); n != 0 {
		t.Errorf("AppendPCMBytes allocated %.0f times with room in dst", n)
	}
}

func BenchmarkAppendPCMBytes(b *testing.B) {
	s := speechNoise(24000, 1, -18, 1)
	dst := make([]byte, 0, 2*len(s))
	b.ReportAllocs()
	b.SetBytes(int64(2 * len(s)))
	for b.Loop() {
		dst = AppendPCMBytes(dst[:0], s)
	}
}

// TestPCMRoundTrip checks the round trip of speech-like samples through
// PCM, appended after what dst holds (package lebytes checks its fast
// paths against the portable ones, which big-endian hosts use).
func TestPCMRoundTrip(t *testing.T) {
	all := speechNoise(16000, 0.1, -6, 3)
	all = append(all, 0, 1, -1, 32767, -32768)
	for _, n := range []int{0, 1, len(all)} {
		s := all[:n]
		b := AppendPCMBytes([]byte{9}, s)
		if len(b) != 1+2*n || b[0] != 9 {
			t.Fatalf("%d samples: %d bytes", n, len(b))
		}
		for i, v := range s {
			if int16(binary.LittleEndian.Uint16(b[1+2*i:])) != v {
				t.Fatalf("%d samples: sample %d is not little-endian in PCM", n, i)
			}
		}
		got, err := AppendPCMSamples([]int16{7}, b[1:])
		if err != nil || !slices.Equal(got[1:], s) || got[0] != 7 {
			t.Fatalf("%d samples do not round trip (%v)", n, err)
		}
	}
}
