package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestNonFinite puts a NaN or an infinity at each place of float tensors
// of every float type and of lengths around the scan's 32-byte blocks.
func TestNonFinite(t *testing.T) {
	type bad struct {
		name string
		bits uint64
	}
	types := []struct {
		typ  engine.DType
		put  func(b []byte, bits uint64)
		bads []bad
		// finite holds the largest finite and smallest subnormal bits.
		finite []uint64
	}{
		{engine.Float16, func(b []byte, v uint64) { binary.LittleEndian.PutUint16(b, uint16(v)) },
			[]bad{{"+Inf", 0x7c00}, {"-Inf", 0xfc00}, {"NaN", 0x7e00}, {"-NaN", 0xffff}},
			[]uint64{0x7bff, 0xfbff, 0x0001, 0x8000}},
		{engine.Float32, func(b []byte, v uint64) { binary.LittleEndian.PutUint32(b, uint32(v)) },
			[]bad{{"+Inf", uint64(math.Float32bits(float32(math.Inf(1))))}, {"-Inf", uint64(math.Float32bits(float32(math.Inf(-1))))}, {"NaN", uint64(math.Float32bits(float32(math.NaN())))}, {"signalling NaN", 0x7f800001}},
			[]uint64{uint64(math.Float32bits(math.MaxFloat32)), uint64(math.Float32bits(-math.MaxFloat32)), 1, 0x80000000}},
		{engine.Float64, binary.LittleEndian.PutUint64,
			[]bad{{"+Inf", math.Float64bits(math.Inf(1))}, {"-Inf", math.Float64bits(math.Inf(-1))}, {"NaN", math.Float64bits(math.NaN())}},
			[]uint64{math.Float64bits(math.MaxFloat64), math.Float64bits(-math.MaxFloat64), 1}},
	}
	for _, tt := range types {
		size := tt.typ.Size()
		for _, n := range []int{1, 3, 4, 7, 8, 9, 16, 17, 33} {
			data := make([]byte, n*size)
			for i := 0; i < n; i++ {
				tt.put(data[i*size:], tt.finite[i%len(tt.finite)])
			}
			if got := nonFinite(tt.typ, data); got != -1 {
				t.Errorf("%s of %d finite numbers: nonFinite = %d; want -1", tt.typ, n, got)
			}
			for _, b := range tt.bads {
				for at := 0; at < n; at++ {
					t.Run(fmt.Sprintf("%s/%d/%s at %d", tt.typ, n, b.name, at), func(t *testing.T) {
						d := append([]byte(nil), data...)
						tt.put(d[at*size:], b.bits)
						if got := nonFinite(tt.typ, d); got != at {
							t.Errorf("nonFinite = %d; want %d", got, at)
						}
					})
				}
			}
		}
	}
	for _, typ := range []engine.DType{engine.Int32, engine.Uint8, engine.Bool} {
		if got := nonFinite(typ, []byte{0xff, 0xff, 0xff, 0xff}); got != -1 {
			t.Errorf("nonFinite(%s) = %d; want -1: only floats have NaNs", typ, got)
		}
	}
}

func BenchmarkNonFinite(b *testing.B) {
	x := constant([]int64{1, 3, 48, 192}, 0.5) // a cls crop
	b.SetBytes(int64(len(x.Data)))
	b.ReportAllocs()
	for b.Loop() {
		if nonFinite(x.Type, x.Data) != -1 {
			b.Fatal("found a NaN")
		}
	}
}

// TestSpecCheck checks tensors against a spec of another name: each
// refusal names the tensor, as a stage that renames the model's inputs
// needs.
func TestSpecCheck(t *testing.T) {
	spec := Spec{Name: "x", Type: engine.Float32, Shape: []int64{Any, 2}}
	tests := []struct {
		t    engine.Tensor
		want string // "" for no error
	}{
		{engine.Float32Tensor("image", []int64{3, 2}, make([]float32, 6)), ""},
		{engine.Float32Tensor("image", []int64{3, 3}, make([]float32, 9)), `tensor "image": shape [3 3], the model takes [-1 2] (dimension 1 must be 2`},
		{engine.Float32Tensor("image", []int64{1, 2}, []float32{0, float32(math.NaN())}), `tensor "image": element 1 is not a finite number`},
		{engine.Tensor{Name: "image", Type: engine.Int64, Shape: []int64{1, 2}, Data: make([]byte, 16)}, `tensor "image": element type int64, the model takes float32`},
	}
	for _, tt := range tests {
		err := spec.Check(&tt.t)
		var ie *engine.InputError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Check(%v) = %v", tt.t.Shape, err)
		case tt.want != "" && (!errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Check(%v) = %v; want an *engine.InputError saying %q", tt.t.Shape, err, tt.want)
		}
	}
}

// TestOptionsCheck checks options without the library.
func TestOptionsCheck(t *testing.T) {
	tests := []struct {
		opts Options
		want string // "" for no error
	}{
		{Options{}, ""},
		{Options{IntraOpThreads: 4, Optimization: "basic"}, ""},
		{Options{InterOpThreads: -2}, "intra_op_threads 0, inter_op_threads -2: threads are 1 or more"},
		{Options{Optimization: "fast"}, `graph_optimization "fast": want disable, basic, extended or all`},
	}
	for _, tt := range tests {
		err := tt.opts.Check()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Check(%+v) = %v; want %q", tt.opts, err, tt.want)
		}
	}
}
