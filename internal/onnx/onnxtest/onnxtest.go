// Package onnxtest writes small ONNX models for tests: a graph of
// standard operators without weights, with the inputs and outputs a test
// needs.
package onnxtest

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Elem is an ONNX element type (TensorProto.DataType).
type Elem uint64

// The element types tests use.
const (
	Float   Elem = 1
	Int64   Elem = 7
	Float16 Elem = 10
	Uint32  Elem = 12
)

// Value is a graph input or output: a name, an element type and
// dimensions, each an int (fixed) or a string (symbolic: any size).
type Value struct {
	Name string
	Elem Elem
	Dims []any
}

// Node is one operator of a graph, with its default attributes.
type Node struct {
	Op      string
	In, Out []string
}

// WriteModel writes an ONNX model (IR version 8, opset 13) of the nodes,
// with the inputs and outputs, to a file in a temporary directory of the
// test and returns its path.
func WriteModel(t testing.TB, nodes []Node, inputs, outputs []Value) string {
	t.Helper()
	var graph []byte
	for _, n := range nodes {
		var b []byte
		for _, in := range n.In {
			b = str(b, 1, in)
		}
		for _, out := range n.Out {
			b = str(b, 2, out)
		}
		graph = msg(graph, 1, str(b, 4, n.Op))
	}
	graph = str(graph, 2, "test")
	for _, v := range inputs {
		graph = msg(graph, 11, valueInfo(v))
	}
	for _, v := range outputs {
		graph = msg(graph, 12, valueInfo(v))
	}
	model := varint(nil, 1, 8)
	model = msg(model, 8, varint(nil, 2, 13))
	model = msg(model, 7, graph)
	path := filepath.Join(t.TempDir(), "test.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// valueInfo encodes v as a ValueInfoProto.
func valueInfo(v Value) []byte {
	var shape []byte
	for _, d := range v.Dims {
		switch d := d.(type) {
		case int:
			shape = msg(shape, 1, varint(nil, 1, uint64(d)))
		case string:
			shape = msg(shape, 1, str(nil, 2, d))
		default:
			panic("onnxtest: a dimension is an int or a string")
		}
	}
	tensor := msg(varint(nil, 1, uint64(v.Elem)), 2, shape)
	return msg(str(nil, 1, v.Name), 2, msg(nil, 1, tensor))
}

// msg appends field as an embedded message of body.
func msg(b []byte, field protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// str appends field as a string.
func str(b []byte, field protowire.Number, s string) []byte {
	return msg(b, field, []byte(s))
}

// varint appends field as a varint.
func varint(b []byte, field protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, field, protowire.VarintType), v)
}
