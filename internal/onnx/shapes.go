package onnx

// Output shapes learnt from runs: what shapes the outputs had for given
// input shapes, so that the next run with those hands ONNX Runtime pooled
// buffers to compute into instead of having it allocate and copy.

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
)

// maxShapes bounds the input shapes a session remembers (a recognizer
// sees one per crop width); past it, the table starts over.
const maxShapes = 256

// shapeTable maps a run's input shapes (shapeKey) to its outputs' shapes.
// A nil entry marks input shapes whose outputs' shapes were not always the
// same (a model whose outputs' size depends on its inputs' values) or had
// no elements: runs with them let ONNX Runtime size the outputs.
type shapeTable struct {
	mu sync.Mutex
	m  map[string][][]int64
}

// shapeKey appends to b an encoding of the inputs' shapes, in order.
func shapeKey(b []byte, inputs []*engine.Tensor) []byte {
	for _, t := range inputs {
		b = binary.AppendUvarint(b, uint64(len(t.Shape)))
		for _, d := range t.Shape {
			b = binary.AppendUvarint(b, uint64(d))
		}
	}
	return b
}

// get returns the outputs' shapes learnt for key, and whether key is
// known at all. The shapes are shared: the caller must not modify them.
func (st *shapeTable) get(key []byte) ([][]int64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	shapes, ok := st.m[string(key)]
	return shapes, ok
}

// learn records the outputs' shapes of a run whose input shapes make key
// (nil shapes: never predict them).
func (st *shapeTable) learn(key []byte, outputs []engine.Tensor) {
	var shapes [][]int64
	for _, t := range outputs {
		if len(t.Data) == 0 {
			shapes = nil
			break
		}
		shapes = append(shapes, slices.Clone(t.Shape))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil || len(st.m) >= maxShapes {
		st.m = make(map[string][][]int64)
	}
	st.m[string(key)] = shapes
}
