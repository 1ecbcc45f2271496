package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// seq returns a float32 tensor of shape whose elements are start,
// start+1, ...
func seq(shape []int64, start float32) engine.Tensor {
	n, _ := engine.Elements(shape)
	v := make([]float32, n)
	for i := range v {
		v[i] = start + float32(i)
	}
	return engine.Float32Tensor("x", shape, v)
}

func TestStack(t *testing.T) {
	tests := []struct {
		name  string
		items []engine.Tensor
		pad   Pad
		shape []int64
		want  []float32
	}{
		{"same shapes", []engine.Tensor{seq([]int64{1, 2}, 0), seq([]int64{2, 2}, 10)}, Pad{}, []int64{3, 2},
			[]float32{0, 1, 10, 11, 12, 13}},
		{"last dimension padded", []engine.Tensor{seq([]int64{1, 2, 1}, 0), seq([]int64{1, 2, 3}, 10)}, Pad{Dims: []int{2}, Value: -1}, []int64{2, 2, 3},
			[]float32{0, -1, -1, 1, -1, -1, 10, 11, 12, 13, 14, 15}},
		{"middle dimension padded with 0", []engine.Tensor{seq([]int64{1, 1, 2}, 1), seq([]int64{1, 2, 2}, 10)}, Pad{Dims: []int{1}}, []int64{2, 2, 2},
			[]float32{1, 2, 0, 0, 10, 11, 12, 13}},
		{"two dimensions padded", []engine.Tensor{seq([]int64{1, 1, 2}, 1), seq([]int64{1, 2, 1}, 10)}, Pad{Dims: []int{1, 2}, Value: 9}, []int64{2, 2, 2},
			[]float32{1, 2, 9, 9, 10, 9, 11, 9}},
		{"one item", []engine.Tensor{seq([]int64{2, 3}, 0)}, Pad{Dims: []int{1}}, []int64{2, 3},
			[]float32{0, 1, 2, 3, 4, 5}},
		{"rank 1", []engine.Tensor{seq([]int64{2}, 0), seq([]int64{1}, 5)}, Pad{}, []int64{3},
			[]float32{0, 1, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Stack("batch", tt.items, tt.pad)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != "batch" || got.Type != engine.Float32 || !slices.Equal(got.Shape, tt.shape) {
				t.Fatalf("Stack = %s %s %v; want batch float32 %v", got.Name, got.Type, got.Shape, tt.shape)
			}
			if v, _ := got.Float32s(); !slices.Equal(v, tt.want) {
				t.Errorf("Stack's elements %v; want %v", v, tt.want)
			}
		})
	}
}

func TestStackTypes(t *testing.T) {
	tests := []struct {
		typ  engine.DType
		pad  float64
		want string // the padding element's bytes, or an error
	}{
		{engine.Float64, 0.5, fmt.Sprint(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.5)))},
		{engine.Int8, -1, "[255]"},
		{engine.Uint8, 255, "[255]"},
		{engine.Int16, -2, "[254 255]"},
		{engine.Int32, 7, "[7 0 0 0]"},
		{engine.Int64, -1, "[255 255 255 255 255 255 255 255]"},
		{engine.Bool, 1, "[1]"},
		{engine.Float16, 0, "[0 0]"},
		{engine.Float16, 1, "float16 tensors pad with 0 only"},
		{engine.Uint8, 256, "256 is not a uint8"},
		{engine.Int8, 0.5, "0.5 is not a int8"},
		{engine.Int64, math.Ldexp(1, 63), "is not a int64"},
		{engine.Bool, 2, "2 is not a bool"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.typ, tt.pad), func(t *testing.T) {
			size := tt.typ.Size()
			items := []engine.Tensor{
				{Name: "x", Type: tt.typ, Shape: []int64{1, 1}, Data: make([]byte, size)},
				{Name: "x", Type: tt.typ, Shape: []int64{1, 2}, Data: make([]byte, 2*size)},
			}
			got, err := Stack("x", items, Pad{Dims: []int{1}, Value: tt.pad})
			if err != nil {
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Stack: %v; want %q", err, tt.want)
				}
				return
			}
			if pad := fmt.Sprint(got.Data[size : 2*size]); pad != tt.want {
				t.Errorf("padding element %s; want %s", pad, tt.want)
			}
			if err := got.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestStackErrors(t *testing.T) {
	tests := []struct {
		name  string
		items []engine.Tensor
		pad   Pad
		want  string
	}{
		{"no items", nil, Pad{}, "no tensors"},
		{"scalar", []engine.Tensor{seq(nil, 0)}, Pad{}, "is a scalar"},
		{"pad dimension 0", []engine.Tensor{seq([]int64{1, 2}, 0)}, Pad{Dims: []int{0}}, "cannot pad dimension 0 of rank-2 tensors"},
		{"pad past the rank", []engine.Tensor{seq([]int64{1, 2}, 0)}, Pad{Dims: []int{2}}, "cannot pad dimension 2"},
		{"types", []engine.Tensor{seq([]int64{1, 2}, 0), {Name: "x", Type: engine.Int32, Shape: []int64{1, 2}, Data: make([]byte, 8)}}, Pad{}, "item 1 is int32 [1 2], item 0 float32 [1 2]"},
		{"ranks", []engine.Tensor{seq([]int64{1, 2}, 0), seq([]int64{1, 2, 1}, 0)}, Pad{}, "item 1 is float32 [1 2 1], item 0 float32 [1 2]"},
		{"unpadded dimension differs", []engine.Tensor{seq([]int64{1, 2, 3}, 0), seq([]int64{1, 3, 3}, 0)}, Pad{Dims: []int{2}}, "item 1 has shape [1 3 3], item 0 [1 2 3]: dimension 1 differs"},
		{"bad item", []engine.Tensor{seq([]int64{1, 2}, 0), {Name: "x", Type: engine.Float32, Shape: []int64{1, 2}, Data: make([]byte, 4)}}, Pad{}, "item 1: invalid input"},
		{"too large", []engine.Tensor{seq([]int64{1, 1}, 0), {Name: "x", Type: engine.Float32, Shape: []int64{1 << 25, 1}, Data: make([]byte, 4<<25)}, {Name: "x", Type: engine.Float32, Shape: []int64{1, 2}, Data: make([]byte, 8)}}, Pad{Dims: []int{1}}, "the batch's shape [33554434 2]: shape [33554434 2] has more than 67108864 elements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Stack("x", tt.items, tt.pad)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Stack = %v; want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	x := seq([]int64{4, 2}, 0)
	parts, err := Split(x, []int64{1, 0, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{0, 1}, {}, {2, 3, 4, 5, 6, 7}}
	for i, p := range parts {
		v, _ := p.Float32s()
		if p.Name != "x" || p.Shape[0] != []int64{1, 0, 3}[i] || p.Shape[1] != 2 || !slices.Equal(v, want[i]) {
			t.Errorf("part %d: %s %v %v; want x [%d 2] %v", i, p.Name, p.Shape, v, []int64{1, 0, 3}[i], want[i])
		}
		if err := p.Check(); err != nil {
			t.Error(err)
		}
	}
	if cap(parts[0].Data) != len(parts[0].Data) {
		t.Error("a part's data can grow into the next part's")
	}
	if !slices.Equal(Sizes([]engine.Tensor{seq([]int64{2, 5}, 0), seq([]int64{1}, 0), seq(nil, 0)}), []int64{2, 1, 1}) {
		t.Error("Sizes: want each item's dimension 0, 1 for a scalar")
	}

	for _, tt := range []struct {
		x     engine.Tensor
		sizes []int64
		want  string
	}{
		{x, []int64{1, 2}, "sizes [1 2] add up to 3, tensor \"x\" has 4 along dimension 0 (shape [4 2])"},
		{x, []int64{5, -1}, "size 5 of a tensor of 4"},
		{x, []int64{-1, 5}, "size -1 of a tensor of 4"},
		{seq(nil, 0), []int64{1}, "is a scalar"},
		{engine.Tensor{Name: "x", Type: engine.Float32, Shape: []int64{2}, Data: nil}, []int64{2}, "makes 8 bytes, but its data has 0"},
	} {
		if _, err := Split(tt.x, tt.sizes); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Split(%v, %v) = %v; want an error saying %q", tt.x.Shape, tt.sizes, err, tt.want)
		}
	}
}

func TestSizeClasses(t *testing.T) {
	if got := classSize(maxClasses - 1); got != engine.MaxTensorBytes {
		t.Errorf("the largest class holds %d bytes; want engine.MaxTensorBytes, %d", got, engine.MaxTensorBytes)
	}
	for c := 1; c < maxClasses; c++ {
		lo, hi := classSize(c-1), classSize(c)
		if hi <= lo || hi-lo > lo/8 {
			t.Fatalf("class %d holds %d bytes, class %d %d: want more, by at most an eighth", c, hi, c-1, lo)
		}
		if classUnder(hi) != c || classUnder(hi+1) != c || classUnder(hi-1) != c-1 {
			t.Errorf("classUnder(%d, %d, %d) = %d, %d, %d; want %d, %d, %d", hi-1, hi, hi+1, classUnder(hi-1), classUnder(hi), classUnder(hi+1), c-1, c, c)
		}
		if classOf(hi) != c || classOf(hi-1) != c || classOf(lo+1) != c || classOf(lo) != c-1 {
			t.Errorf("classOf(%d, %d, %d, %d) = %d, %d, %d, %d; want %d, %d, %d, %d", lo, lo+1, hi-1, hi, classOf(lo), classOf(lo+1), classOf(hi-1), classOf(hi), c-1, c, c, c)
		}
	}
	for _, n := range []int{1, 63, 64} {
		if classOf(n) != 0 {
			t.Errorf("classOf(%d) = %d; want 0", n, classOf(n))
		}
	}
}

// TestStackRecycled stacks into recycled memory: the padding is the pad
// value, not what the memory held before.
func TestStackRecycled(t *testing.T) {
	items := []engine.Tensor{seq([]int64{1, 100}, 1), seq([]int64{1, 300}, 1)}
	for range 3 {
		old, err := Stack("x", []engine.Tensor{seq([]int64{2, 300}, 7)}, Pad{})
		if err != nil {
			t.Fatal(err)
		}
		Recycle([]engine.Tensor{old})
		got, err := Stack("x", items, Pad{Dims: []int{1}})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := got.Float32s()
		for i := 100; i < 300; i++ {
			if v[i] != 0 {
				t.Fatalf("padding element %d is %v; want 0", i, v[i])
			}
		}
	}
}
