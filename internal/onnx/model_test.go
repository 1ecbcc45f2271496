package onnx

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx/onnxtest"
)

// node and value shorten a test model's graph.
func node(op string, in, out []string) onnxtest.Node { return onnxtest.Node{Op: op, In: in, Out: out} }

func value(name string, elem onnxtest.Elem, dims ...any) onnxtest.Value {
	return onnxtest.Value{Name: name, Elem: elem, Dims: dims}
}

func int64s(t *testing.T, x engine.Tensor) []int64 {
	t.Helper()
	if x.Type != engine.Int64 {
		t.Fatalf("tensor %q is %s, not int64", x.Name, x.Type)
	}
	v := make([]int64, len(x.Data)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(x.Data[8*i:]))
	}
	return v
}

// TestOutputsSizedByValues runs NonZero, whose output's shape depends on
// its input's values: runs with one input shape give outputs of different
// shapes, each right.
func TestOutputsSizedByValues(t *testing.T) {
	model(t, clsModel) // skips without the library
	path := onnxtest.WriteModel(t, []onnxtest.Node{node("NonZero", []string{"x"}, []string{"y"})},
		[]onnxtest.Value{value("x", onnxtest.Float, "n")}, []onnxtest.Value{value("y", onnxtest.Int64, 1, "nnz")})
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Outputs(); len(got) != 1 || got[0].String() != "y int64 [1 -1]" {
		t.Errorf("Outputs() = %v; want [y int64 [1 -1]]", got)
	}
	for _, tt := range []struct {
		x    []float32
		want []int64
	}{
		{[]float32{1, 0, 2, 0}, []int64{0, 2}},
		{[]float32{1, 0, 2, 0}, []int64{0, 2}}, // into a buffer of the shape learnt
		{[]float32{1, 1, 1, 1}, []int64{0, 1, 2, 3}},
		{[]float32{0, 0, 0, 1}, []int64{3}},
		{[]float32{0, 0, 0, 0}, []int64{}},
		{[]float32{5, 0, 0, 0}, []int64{0}},
		{[]float32{1, 2}, []int64{0, 1}},
		{[]float32{1, 2}, []int64{0, 1}},
		{[]float32{0, 2}, []int64{1}},
	} {
		out, err := s.Run(context.Background(), []engine.Tensor{engine.Float32Tensor("x", []int64{int64(len(tt.x))}, tt.x)})
		if err != nil {
			t.Fatalf("x = %v: %v", tt.x, err)
		}
		if got := int64s(t, out[0]); !slices.Equal(got, tt.want) || !slices.Equal(out[0].Shape, []int64{1, int64(len(tt.want))}) {
			t.Errorf("NonZero(%v) = %v of shape %v; want %v", tt.x, got, out[0].Shape, tt.want)
		}
		Recycle(out)
	}
}

// TestInputsByName runs a model of two inputs given in either order.
func TestInputsByName(t *testing.T) {
	model(t, clsModel)
	path := onnxtest.WriteModel(t, []onnxtest.Node{node("Sub", []string{"a", "b"}, []string{"d"})},
		[]onnxtest.Value{value("a", onnxtest.Float, 2), value("b", onnxtest.Float, 2)}, []onnxtest.Value{value("d", onnxtest.Float, 2)})
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := engine.Float32Tensor("a", []int64{2}, []float32{10, 20})
	b := engine.Float32Tensor("b", []int64{2}, []float32{1, 2})
	for _, in := range [][]engine.Tensor{{a, b}, {b, a}} {
		out, err := s.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if got := floats(t, out[0]); !slices.Equal(got, []float32{9, 18}) {
			t.Errorf("a - b = %v; want [9 18]", got)
		}
	}
	_, err = s.Run(context.Background(), []engine.Tensor{b})
	var ie *engine.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `no tensor "a"; the model takes a float32 [2], b float32 [2]`) {
		t.Errorf("Run without a = %v; want an *engine.InputError naming a", err)
	}
}

// TestOpenUncarried opens models that take or give what a tensor chunk
// does not carry.
func TestOpenUncarried(t *testing.T) {
	model(t, clsModel)
	tests := []struct {
		name            string
		nodes           []onnxtest.Node
		inputs, outputs []onnxtest.Value
		want            string
	}{
		{"uint32 input", []onnxtest.Node{node("Identity", []string{"x"}, []string{"y"})},
			[]onnxtest.Value{value("x", onnxtest.Uint32, 2)}, []onnxtest.Value{value("y", onnxtest.Uint32, 2)},
			`input "x" has elements of type ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, which this backend does not carry`},
		{"float16 output", []onnxtest.Node{node("Identity", []string{"x"}, []string{"y"})},
			[]onnxtest.Value{value("x", onnxtest.Float16, 2)}, []onnxtest.Value{value("y", onnxtest.Float16, 2)},
			`output "y" has elements of type ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, which this backend does not carry`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := onnxtest.WriteModel(t, tt.nodes, tt.inputs, tt.outputs)
			s, err := Open(path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v; want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
}
