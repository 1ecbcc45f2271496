package lebytes

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// int16Cases and float32Cases hold the edges of each type.
var (
	int16Cases   = []int16{0, 1, -1, 32767, -32768, 0x1234, -0x1234, 7}
	float32Cases = []float32{0, 1, -1, 0.5, float32(math.Inf(-1)), float32(math.Inf(1)), math.Float32frombits(0x7fc00001),
		math.SmallestNonzeroFloat32, math.MaxFloat32, float32(math.Copysign(0, -1)), 3.25e-7}
)

// TestInt16s checks the encoding against encoding/binary's, both paths,
// and the round trip.
func TestInt16s(t *testing.T) {
	for _, n := range []int{0, 1, len(int16Cases)} {
		s := int16Cases[:n]
		want := []byte{9}
		for _, v := range s {
			want = binary.LittleEndian.AppendUint16(want, uint16(v))
		}
		fast, portable := AppendInt16s([]byte{9}, s), appendInt16sPortable([]byte{9}, s)
		if !bytes.Equal(fast, want) || !bytes.Equal(portable, want) {
			t.Fatalf("%d int16s: %x (portable %x), want %x", n, fast, portable, want)
		}
		back, backPortable := make([]int16, n), make([]int16, n)
		ReadInt16s(back, want[1:])
		readInt16sPortable(backPortable, want[1:])
		if !slices.Equal(back, s) || !slices.Equal(backPortable, s) || !slices.Equal(Int16s(want[1:]), s) {
			t.Fatalf("%d int16s do not round trip: %v, portable %v", n, back, backPortable)
		}
	}
}

// TestFloat32s checks the encoding against encoding/binary's, both paths,
// and the round trip bit for bit (NaN's payload and -0 included).
func TestFloat32s(t *testing.T) {
	for _, n := range []int{0, 1, len(float32Cases)} {
		s := float32Cases[:n]
		want := []byte{9}
		for _, v := range s {
			want = binary.LittleEndian.AppendUint32(want, math.Float32bits(v))
		}
		fast, portable := AppendFloat32s([]byte{9}, s), appendFloat32sPortable([]byte{9}, s)
		if !bytes.Equal(fast, want) || !bytes.Equal(portable, want) {
			t.Fatalf("%d float32s: %x (portable %x), want %x", n, fast, portable, want)
		}
		back, backPortable := make([]float32, n), make([]float32, n)
		ReadFloat32s(back, want[1:])
		readFloat32sPortable(backPortable, want[1:])
		got := Float32s(want[1:])
		for i := range s {
			b := math.Float32bits(s[i])
			if math.Float32bits(back[i]) != b || math.Float32bits(backPortable[i]) != b || math.Float32bits(got[i]) != b {
				t.Fatalf("%d float32s: element %d does not round trip bit for bit", n, i)
			}
		}
	}
}

// TestViews checks that the views share memory with what they view, and
// that a misaligned start has none.
func TestViews(t *testing.T) {
	if !NativeLE {
		for _, ok := range []bool{okOf(ViewInt16s(make([]byte, 4))), okOf(ViewFloat32s(make([]byte, 4))),
			okOf(ViewInt16Bytes(make([]int16, 2))), okOf(ViewFloat32Bytes(make([]float32, 2)))} {
			if ok {
				t.Fatal("a view on a big-endian host")
			}
		}
		t.Skip("no views on a big-endian host")
	}
	buf := make([]float32, 4) // 4-aligned memory
	b, ok := ViewFloat32Bytes(buf)
	if !ok || len(b) != 16 {
		t.Fatalf("ViewFloat32Bytes: %d bytes, %v", len(b), ok)
	}
	copy(b, AppendFloat32s(nil, []float32{1.5, -2, 3, 4}))
	if buf[0] != 1.5 || buf[1] != -2 {
		t.Fatalf("the bytes view does not share memory: %v", buf)
	}
	f, ok := ViewFloat32s(b[:15])
	if !ok || len(f) != 3 || f[1] != -2 {
		t.Fatalf("ViewFloat32s: %v, %v", f, ok)
	}
	f[2] = 8
	if buf[2] != 8 {
		t.Fatal("the float32 view does not share memory")
	}
	if _, ok := ViewFloat32s(b[1:]); ok {
		t.Error("a float32 view of a misaligned start")
	}
	s, ok := ViewInt16s(b[2:9])
	if !ok || len(s) != 3 {
		t.Fatalf("ViewInt16s: %v, %v", s, ok)
	}
	if _, ok := ViewInt16s(b[1:]); ok {
		t.Error("an int16 view of a misaligned start")
	}
	samples := []int16{1, -2}
	sb, ok := ViewInt16Bytes(samples)
	if !ok || !bytes.Equal(sb, AppendInt16s(nil, samples)) {
		t.Fatalf("ViewInt16Bytes: %x, %v", sb, ok)
	}
	for _, empty := range [][]byte{nil, {}} {
		if v, ok := ViewFloat32s(empty); !ok || len(v) != 0 {
			t.Errorf("ViewFloat32s(%v): %v, %v", empty, v, ok)
		}
	}
}

func okOf[T any](_ T, ok bool) bool { return ok }

func TestAppendDoesNotAllocate(t *testing.T) {
	s, f := make([]int16, 480), make([]float32, 480)
	dst := make([]byte, 0, 4*480)
	if n := testing.AllocsPerRun(100, func() { dst = AppendInt16s(AppendFloat32s(dst[:0], f[:240]), s[:240]) }); n != 0 {
		t.Errorf("appending allocated %.0f times with room in dst", n)
	}
}

func BenchmarkInt16s(b *testing.B) {
	s := make([]int16, 24000)
	dst := make([]byte, 0, 2*len(s))
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(2 * len(s)))
		for b.Loop() {
			dst = AppendInt16s(dst[:0], s)
		}
	})
	b.Run("read", func(b *testing.B) {
		dst = AppendInt16s(dst[:0], s)
		b.ReportAllocs()
		b.SetBytes(int64(2 * len(s)))
		for b.Loop() {
			ReadInt16s(s, dst)
		}
	})
}
