package onnx

// Checking a request's input tensors against the model before ONNX
// Runtime sees them.

import (
	"encoding/binary"
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// CheckInputs reports what Run would refuse in inputs: a tensor whose
// data does not match its shape (engine.Tensor.Check), a name the model
// does not take, two tensors of one name, a missing input, another element
// type, rank or size of a fixed dimension than the model's, a dimension of
// 0 (an empty batch), or a NaN or infinity in a float tensor. The error is
// an *engine.InputError naming the tensor and the mismatch.
func (s *Session) CheckInputs(inputs []engine.Tensor) error {
	_, err := s.order(inputs)
	return err
}

// order checks inputs and returns them in the model's order.
func (s *Session) order(inputs []engine.Tensor) ([]*engine.Tensor, error) {
	ordered := make([]*engine.Tensor, len(s.inputs))
	for i := range inputs {
		t := &inputs[i]
		j := -1
		for k := range s.inputs {
			if s.inputs[k].Name == t.Name {
				j = k
				break
			}
		}
		if j < 0 {
			return nil, inputError("tensor %q: the model takes no tensor of that name; it takes %s", clip(t.Name), names(s.inputs))
		}
		if ordered[j] != nil {
			return nil, inputError("two tensors named %q", t.Name)
		}
		if err := checkTensor(t, &s.inputs[j]); err != nil {
			return nil, err
		}
		ordered[j] = t
	}
	for j, t := range ordered {
		if t == nil {
			return nil, inputError("no tensor %q; the model takes %s", s.inputs[j].Name, specList(s.inputs))
		}
	}
	return ordered, nil
}

// Check reports what Run would refuse in t as the model's input s,
// whatever t's name (a stage may feed an input from a tensor it names
// otherwise): data that does not match its shape, another element type,
// rank or size of a fixed dimension, a dimension of 0, or a NaN or
// infinity in a float tensor. The error is an *engine.InputError naming
// t.
func (s Spec) Check(t *engine.Tensor) error {
	return checkTensor(t, &s)
}

// checkTensor reports what is wrong with t as the model's input m.
func checkTensor(t *engine.Tensor, m *Spec) error {
	if err := t.Check(); err != nil {
		return err
	}
	if t.Type != m.Type {
		return inputError("tensor %q: element type %s, the model takes %s", t.Name, t.Type, m.Type)
	}
	if len(t.Shape) != len(m.Shape) {
		return inputError("tensor %q: shape %s, the model takes %s (rank %d; -1: any size)", t.Name, FormatShape(t.Shape), FormatShape(m.Shape), len(m.Shape))
	}
	for i, d := range t.Shape {
		if m.Shape[i] != Any && d != m.Shape[i] {
			return inputError("tensor %q: shape %s, the model takes %s (dimension %d must be %d; -1: any size)", t.Name, FormatShape(t.Shape), FormatShape(m.Shape), i, m.Shape[i])
		}
	}
	for i, d := range t.Shape {
		if d == 0 {
			return inputError("tensor %q: shape %s has no elements (dimension %d is 0): there is nothing to run", t.Name, FormatShape(t.Shape), i)
		}
	}
	if i := nonFinite(t.Type, t.Data); i >= 0 {
		return inputError("tensor %q: element %d is not a finite number (NaN or infinity)", t.Name, i)
	}
	return nil
}

// inputError returns an *engine.InputError with the formatted reason.
func inputError(format string, args ...any) error {
	return &engine.InputError{Reason: fmt.Sprintf(format, args...)}
}

// specList returns the specs for a message: "x float32 [-1 3 48 -1]".
func specList(specs []Spec) string {
	s := ""
	for i, sp := range specs {
		if i > 0 {
			s += ", "
		}
		s += sp.String()
	}
	return s
}

// maxEchoedName bounds the unknown tensor name a message repeats.
const maxEchoedName = 64

// clip returns name, cut to maxEchoedName bytes.
func clip(name string) string {
	if len(name) > maxEchoedName {
		return name[:maxEchoedName] + "…"
	}
	return name
}

// Masks of the IEEE 754 exponent in every lane of a 64-bit word, and its
// lowest bit: a lane's exponent is all ones (NaN or infinity) exactly when
// adding low to the masked lane carries into the lane's top bit, and no
// lane carries into the next.
var exponents = map[engine.DType]struct{ mask, low, top uint64 }{
	engine.Float16: {0x7c007c007c007c00, 0x0400040004000400, 0x8000800080008000},
	engine.Float32: {0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000},
	engine.Float64: {0x7ff0000000000000, 0x0010000000000000, 0x8000000000000000},
}

// nonFinite returns the index of the first NaN or infinity in data, a
// float tensor's little-endian elements, or -1 (always for other types).
func nonFinite(typ engine.DType, data []byte) int {
	e, ok := exponents[typ]
	if !ok {
		return -1
	}
	var acc uint64
	b := data
	for len(b) >= 32 {
		acc |= (binary.LittleEndian.Uint64(b)&e.mask + e.low) |
			(binary.LittleEndian.Uint64(b[8:])&e.mask + e.low) |
			(binary.LittleEndian.Uint64(b[16:])&e.mask + e.low) |
			(binary.LittleEndian.Uint64(b[24:])&e.mask + e.low)
		b = b[32:]
	}
	var tail [8]byte
	for len(b) > 0 {
		n := copy(tail[:], b) // zeros (finite) fill a short last word
		clear(tail[n:])
		acc |= binary.LittleEndian.Uint64(tail[:])&e.mask + e.low
		b = b[n:]
	}
	if acc&e.top == 0 {
		return -1
	}
	size := typ.Size()
	lane := e.mask >> (64 - 8*size) // one element's exponent
	for i := 0; i < len(data); i += size {
		var bits uint64
		for k := size - 1; k >= 0; k-- {
			bits = bits<<8 | uint64(data[i+k])
		}
		if bits&lane == lane {
			return i / size
		}
	}
	return -1
}
