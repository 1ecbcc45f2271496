package onnx

// Batches: several requests' tensors stacked along dimension 0 for one
// run, and a run's outputs split back.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
)

// Pad says how Stack joins items of different sizes: the dimensions (never
// 0) that it pads, at their end, to the largest item's size, and the value
// of the elements it adds (for a batch of text-line crops normalized to
// [-1, 1], 0: PaddleOCR's).
type Pad struct {
	Dims  []int
	Value float64
}

// Sizes returns each item's dimension 0 (1 for a scalar): what Split takes
// to cut a batch of them back.
func Sizes(items []engine.Tensor) []int64 {
	sizes := make([]int64, len(items))
	for i, t := range items {
		sizes[i] = 1
		if len(t.Shape) > 0 {
			sizes[i] = t.Shape[0]
		}
	}
	return sizes
}

// Stack returns one tensor named name holding items one after another
// along dimension 0: a batch for one Session.Run. The items must have one
// element type and rank (1 or more), and agree on every dimension but 0
// and those of pad.Dims, which are padded to the largest item's. The
// result's data is the caller's, from the pool Recycle gives back to; the
// items are only read.
func Stack(name string, items []engine.Tensor, pad Pad) (engine.Tensor, error) {
	if len(items) == 0 {
		return engine.Tensor{}, fmt.Errorf("onnx: stack: no tensors")
	}
	first := &items[0]
	rank := len(first.Shape)
	if rank == 0 {
		return engine.Tensor{}, fmt.Errorf("onnx: stack: tensor %q is a scalar; stacking is along dimension 0", first.Name)
	}
	for _, d := range pad.Dims {
		if d < 1 || d >= rank {
			return engine.Tensor{}, fmt.Errorf("onnx: stack: cannot pad dimension %d of rank-%d tensors (1 to %d)", d, rank, rank-1)
		}
	}
	shape := slices.Clone(first.Shape)
	shape[0] = 0
	for i := range items {
		t := &items[i]
		if err := t.Check(); err != nil {
			return engine.Tensor{}, fmt.Errorf("onnx: stack: item %d: %w", i, err)
		}
		if t.Type != first.Type || len(t.Shape) != rank {
			return engine.Tensor{}, fmt.Errorf("onnx: stack: item %d is %s %s, item 0 %s %s", i, t.Type, FormatShape(t.Shape), first.Type, FormatShape(first.Shape))
		}
		shape[0] += t.Shape[0]
		for d := 1; d < rank; d++ {
			switch {
			case slices.Contains(pad.Dims, d):
				shape[d] = max(shape[d], t.Shape[d])
			case t.Shape[d] != first.Shape[d]:
				return engine.Tensor{}, fmt.Errorf("onnx: stack: item %d has shape %s, item 0 %s: dimension %d differs and is not padded", i, FormatShape(t.Shape), FormatShape(first.Shape), d)
			}
		}
	}
	size := first.Type.Size()
	n, err := engine.Elements(shape)
	if err == nil && n*int64(size) > engine.MaxTensorBytes {
		err = fmt.Errorf("%d bytes; the limit is %d", n*int64(size), engine.MaxTensorBytes)
	}
	if err != nil {
		return engine.Tensor{}, fmt.Errorf("onnx: stack: the batch's shape %s: %w", FormatShape(shape), err)
	}
	fill, err := encode(first.Type, pad.Value)
	if err != nil {
		return engine.Tensor{}, fmt.Errorf("onnx: stack: pad value: %w", err)
	}
	data := buffer(int(n) * size)
	if padded(items, shape) {
		for i := 0; i < len(data); i += copy(data[i:], fill) {
		}
	}
	row := int64(size)
	for _, d := range shape[1:] {
		row *= d
	}
	off := int64(0)
	for i := range items {
		t := &items[i]
		place(data[off:], shape[1:], t.Data, t.Shape, int64(size))
		off += t.Shape[0] * row
	}
	return engine.Tensor{Name: name, Type: first.Type, Shape: shape, Data: data}, nil
}

// padded reports whether some item is smaller than shape past dimension 0.
func padded(items []engine.Tensor, shape []int64) bool {
	for _, t := range items {
		if !slices.Equal(t.Shape[1:], shape[1:]) {
			return true
		}
	}
	return false
}

// place copies src, of shape srcShape, into dst, whose dimensions past the
// first are dstTail (each at least srcShape's), at the start of each.
func place(dst []byte, dstTail []int64, src []byte, srcShape []int64, size int64) {
	dstStride, srcStride := size, size
	for i, d := range dstTail {
		dstStride *= d
		srcStride *= srcShape[i+1]
	}
	if slices.Equal(dstTail, srcShape[1:]) {
		copy(dst, src[:srcShape[0]*srcStride])
		return
	}
	for j := int64(0); j < srcShape[0]; j++ {
		place(dst[j*dstStride:], dstTail[1:], src[j*srcStride:], srcShape[1:], size)
	}
}

// intRanges are the values each integer type (and bool) holds: from the
// first, up to but not including the second.
var intRanges = map[engine.DType][2]float64{
	engine.Int8:  {math.MinInt8, 1 << 7},
	engine.Uint8: {0, 1 << 8},
	engine.Int16: {math.MinInt16, 1 << 15},
	engine.Int32: {math.MinInt32, 1 << 31},
	engine.Int64: {math.MinInt64, 1 << 63},
	engine.Bool:  {0, 2},
}

// encode returns v as one little-endian element of type t, or an error if
// t cannot hold it exactly.
func encode(t engine.DType, v float64) ([]byte, error) {
	b := make([]byte, t.Size())
	switch t {
	case engine.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		return b, nil
	case engine.Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		return b, nil
	case engine.Float16:
		if v != 0 {
			return nil, fmt.Errorf("%v: float16 tensors pad with 0 only", v)
		}
		return b, nil
	}
	r, ok := intRanges[t]
	if !ok {
		return nil, fmt.Errorf("unknown element type %q", t)
	}
	if v != math.Trunc(v) || v < r[0] || v >= r[1] {
		return nil, fmt.Errorf("%v is not a %s", v, t)
	}
	x := uint64(int64(v))
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
	return b, nil
}

// Split cuts t along dimension 0 into parts of sizes[i] rows, in order,
// each named as t: a batch's output, back to its items. The sizes must add
// up to t's dimension 0. The parts share t's memory, which stays read-only.
func Split(t engine.Tensor, sizes []int64) ([]engine.Tensor, error) {
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("onnx: split: %w", err)
	}
	if len(t.Shape) == 0 {
		return nil, fmt.Errorf("onnx: split: tensor %q is a scalar; splitting is along dimension 0", t.Name)
	}
	var total int64
	for _, n := range sizes {
		if n < 0 || n > t.Shape[0] {
			return nil, fmt.Errorf("onnx: split: size %d of a tensor of %d along dimension 0", n, t.Shape[0])
		}
		total += n
	}
	if total != t.Shape[0] {
		return nil, fmt.Errorf("onnx: split: sizes %v add up to %d, tensor %q has %d along dimension 0 (shape %s)", sizes, total, t.Name, t.Shape[0], FormatShape(t.Shape))
	}
	row := int64(t.Type.Size())
	for _, d := range t.Shape[1:] {
		row *= d
	}
	parts := make([]engine.Tensor, len(sizes))
	off := int64(0)
	for i, n := range sizes {
		shape := slices.Clone(t.Shape)
		shape[0] = n
		end := off + n*row
		parts[i] = engine.Tensor{Name: t.Name, Type: t.Type, Shape: shape, Data: t.Data[off:end:end]}
		off = end
	}
	return parts, nil
}
