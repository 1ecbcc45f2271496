package onnx

// Tensor memory that runs reuse: a pool of buffers by size, which Run's
// outputs and Stack's batches come from and Recycle gives back to.

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/omnistage/omnistage/internal/engine"
)

// Size classes of pooled buffers: eight a doubling, so that a buffer is
// at most an eighth larger than asked for, from 64 bytes up to
// engine.MaxTensorBytes.
const (
	stepBits   = 3 // log2 of the classes a doubling
	minBits    = 6 // log2 of the smallest class
	maxClasses = (28-minBits)<<stepBits + 1
)

// classSize returns the capacity of size class c.
func classSize(c int) int {
	steps := 1 << stepBits
	return (steps + c%steps) << (c/steps + minBits - stepBits)
}

// classOf returns the smallest size class that holds n bytes.
func classOf(n int) int {
	if n <= 1<<minBits {
		return 0
	}
	shift := bits.Len(uint(n-1)) - 1 - stepBits
	return (shift-minBits+stepBits)<<stepBits + (n-1)>>shift + 1 - 1<<stepBits
}

// classUnder returns the largest size class that a buffer of capacity c
// (at least the smallest class's) can serve.
func classUnder(c int) int {
	shift := bits.Len(uint(c)) - 1 - stepBits
	return (shift-minBits+stepBits)<<stepBits + c>>shift - 1<<stepBits
}

// pools holds free buffers by size class.
var pools [maxClasses]sync.Pool

// buffer returns n bytes of memory, a free pooled buffer when there is one
// (its old contents still in it) or new memory with the capacity of its
// size class, so that Recycle files it back there.
func buffer(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	c := classOf(n)
	if c >= maxClasses {
		return make([]byte, n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, classSize(c))
}

// Recycle gives the memory of tensors that Run returned, or that Stack
// made, back for later runs and batches to use. The caller, and everyone it
// gave the tensors to, must be done with them: the next run may overwrite
// their data. Recycling is optional (memory never recycled is collected
// like any), and is for whole tensors only, once each: never Split's
// parts, nor a tensor sent on as a chunk.
func Recycle(tensors []engine.Tensor) {
	for _, t := range tensors {
		c := cap(t.Data)
		if c < 1<<minBits || uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%8 != 0 {
			continue
		}
		if k := classUnder(c); k < maxClasses {
			b := t.Data[:0]
			pools[k].Put(&b)
		}
	}
}
