package onnx

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"google.golang.org/protobuf/encoding/protowire"
)

// ONNX's element types (TensorProto.DataType) the test models use.
const (
	onnxFloat   = 1
	onnxInt64   = 7
	onnxFloat16 = 10
	onnxUint32  = 12
)

// value is a graph input or output of a test model: a name, an ONNX
// element type and dimensions, a string for a symbolic one.
type value struct {
	name string
	elem int
	dims []any
}

// node is one operator of a test model.
type node struct {
	op      string
	in, out []string
}

// writeModel writes an ONNX model (opset 13) of the nodes, with the inputs
// and outputs, to a file in dir and returns its path.
func writeModel(t *testing.T, nodes []node, inputs, outputs []value) string {
	t.Helper()
	msg := func(field protowire.Number, body []byte) []byte {
		b := protowire.AppendTag(nil, field, protowire.BytesType)
		return protowire.AppendBytes(b, body)
	}
	str := func(field protowire.Number, s string) []byte { return msg(field, []byte(s)) }
	varint := func(field protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, field, protowire.VarintType), v)
	}
	valueInfo := func(v value) []byte {
		var shape []byte
		for _, d := range v.dims {
			switch d := d.(type) {
			case int:
				shape = append(shape, msg(1, varint(1, uint64(d)))...)
			case string:
				shape = append(shape, msg(1, str(2, d))...)
			}
		}
		tensor := append(varint(1, uint64(v.elem)), msg(2, shape)...)
		return append(str(1, v.name), msg(2, msg(1, tensor))...)
	}
	var graph []byte
	for _, n := range nodes {
		var b []byte
		for _, in := range n.in {
			b = append(b, str(1, in)...)
		}
		for _, out := range n.out {
			b = append(b, str(2, out)...)
		}
		graph = append(graph, msg(1, append(b, str(4, n.op)...))...)
	}
	graph = append(graph, str(2, "test")...)
	for _, v := range inputs {
		graph = append(graph, msg(11, valueInfo(v))...)
	}
	for _, v := range outputs {
		graph = append(graph, msg(12, valueInfo(v))...)
	}
	model := append(varint(1, 8), msg(8, varint(2, 13))...)
	model = append(model, msg(7, graph)...)
	path := filepath.Join(t.TempDir(), "test.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
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
	path := writeModel(t, []node{{"NonZero", []string{"x"}, []string{"y"}}},
		[]value{{"x", onnxFloat, []any{"n"}}}, []value{{"y", onnxInt64, []any{1, "nnz"}}})
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
	path := writeModel(t, []node{{"Sub", []string{"a", "b"}, []string{"d"}}},
		[]value{{"a", onnxFloat, []any{2}}, {"b", onnxFloat, []any{2}}}, []value{{"d", onnxFloat, []any{2}}})
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
		nodes           []node
		inputs, outputs []value
		want            string
	}{
		{"uint32 input", []node{{"Identity", []string{"x"}, []string{"y"}}},
			[]value{{"x", onnxUint32, []any{2}}}, []value{{"y", onnxUint32, []any{2}}},
			`input "x" has elements of type ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, which this backend does not carry`},
		{"float16 output", []node{{"Identity", []string{"x"}, []string{"y"}}},
			[]value{{"x", onnxFloat16, []any{2}}}, []value{{"y", onnxFloat16, []any{2}}},
			`output "y" has elements of type ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, which this backend does not carry`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeModel(t, tt.nodes, tt.inputs, tt.outputs)
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
