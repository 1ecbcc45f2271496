package engine

// The tensor kind: named tensors, as a model backend takes and gives them.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/lebytes"
)

// DType is a tensor's element type, named as NumPy names it.
type DType string

// The element types a tensor may have.
const (
	Float32 DType = "float32"
	Float64 DType = "float64"
	Float16 DType = "float16"
	Int8    DType = "int8"
	Uint8   DType = "uint8"
	Int16   DType = "int16"
	Int32   DType = "int32"
	Int64   DType = "int64"
	Bool    DType = "bool"
)

// DTypes lists the element types, in the order the docs list them.
var DTypes = []DType{Float32, Float64, Float16, Int8, Uint8, Int16, Int32, Int64, Bool}

// Size returns the bytes of one element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Float64, Int64:
		return 8
	case Float32, Int32:
		return 4
	case Float16, Int16:
		return 2
	case Int8, Uint8, Bool:
		return 1
	}
	return 0
}

// Limits of a tensor, wherever it travels: a shape past them is refused
// before any memory is set aside for it.
const (
	MaxTensorRank     = 8
	MaxTensorElements = 1 << 26 // 64 Mi elements
	MaxTensorBytes    = 1 << 28 // 256 MiB
	MaxTensors        = 16      // tensors in one chunk
)

// Tensor is one named tensor: its element type, its shape and its
// elements in row-major order, each little-endian.
type Tensor struct {
	Name  string
	Type  DType
	Shape []int64
	Data  []byte
}

// Tensors is a chunk of kind tensor: one or more named tensors.
type Tensors struct {
	Tensors []Tensor
}

// Elements returns the number of elements shape declares, or an error
// when a dimension is negative or the count passes MaxTensorElements.
func Elements(shape []int64) (int64, error) {
	if len(shape) > MaxTensorRank {
		return 0, fmt.Errorf("rank %d; the limit is %d", len(shape), MaxTensorRank)
	}
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is %d; dimensions are 0 or more", i, d)
		}
		if d > 0 && n > MaxTensorElements/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, MaxTensorElements)
		}
		n *= d
	}
	return n, nil
}

// Check reports what is wrong with t as an *InputError naming it: an
// unknown element type, a shape past the limits, or data whose length is
// not what the shape and type make.
func (t *Tensor) Check() error {
	size := t.Type.Size()
	if size == 0 {
		return &InputError{Reason: fmt.Sprintf("tensor %q: unknown element type %q", t.Name, t.Type)}
	}
	n, err := Elements(t.Shape)
	if err != nil {
		return &InputError{Reason: fmt.Sprintf("tensor %q: %v", t.Name, err)}
	}
	if want := n * int64(size); want > MaxTensorBytes {
		return &InputError{Reason: fmt.Sprintf("tensor %q: %d bytes; the limit is %d", t.Name, want, MaxTensorBytes)}
	} else if int64(len(t.Data)) != want {
		return &InputError{Reason: fmt.Sprintf("tensor %q: shape %v of %s makes %d bytes, but its data has %d", t.Name, t.Shape, t.Type, want, len(t.Data))}
	}
	return nil
}

// Check reports what is wrong with ts: no tensors, too many, two with one
// name, or a tensor's own fault.
func (ts *Tensors) Check() error {
	if len(ts.Tensors) == 0 {
		return &InputError{Reason: "no tensors"}
	}
	if len(ts.Tensors) > MaxTensors {
		return &InputError{Reason: fmt.Sprintf("%d tensors; the limit is %d", len(ts.Tensors), MaxTensors)}
	}
	seen := make(map[string]bool, len(ts.Tensors))
	for i := range ts.Tensors {
		t := &ts.Tensors[i]
		if seen[t.Name] {
			return &InputError{Reason: fmt.Sprintf("two tensors named %q", t.Name)}
		}
		seen[t.Name] = true
		if err := t.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Find returns the tensor named name, or nil.
func (ts *Tensors) Find(name string) *Tensor {
	for i := range ts.Tensors {
		if ts.Tensors[i].Name == name {
			return &ts.Tensors[i]
		}
	}
	return nil
}

// Float32s returns a float32 tensor's elements. On a little-endian machine
// they share t.Data's memory (read-only, as every chunk is).
func (t *Tensor) Float32s() ([]float32, error) {
	if t.Type != Float32 {
		return nil, fmt.Errorf("tensor %q is %s, not float32", t.Name, t.Type)
	}
	if len(t.Data)%4 != 0 {
		return nil, fmt.Errorf("tensor %q: %d bytes is not a whole number of float32s", t.Name, len(t.Data))
	}
	if len(t.Data) == 0 {
		return []float32{}, nil
	}
	if v, ok := lebytes.ViewFloat32s(t.Data); ok {
		return v, nil
	}
	return lebytes.Float32s(t.Data), nil
}

// Float32Tensor returns a float32 tensor named name of shape with the
// elements v. On a little-endian machine its data shares v's memory: v
// must not change afterwards.
func Float32Tensor(name string, shape []int64, v []float32) Tensor {
	t := Tensor{Name: name, Type: Float32, Shape: shape}
	if len(v) == 0 {
		t.Data = []byte{}
		return t
	}
	if b, ok := lebytes.ViewFloat32Bytes(v); ok {
		t.Data = b
	} else {
		t.Data = lebytes.AppendFloat32s(make([]byte, 0, 4*len(v)), v)
	}
	return t
}
