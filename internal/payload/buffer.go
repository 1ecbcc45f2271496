package payload

// The pool of scratch buffers that payloads are encoded in and stream
// frames are written and read in.

import (
	"sync"
)

// bufs holds scratch buffers (*[]byte) for Encode, Decode and streams;
// bigger ones are dropped so that a burst of long payloads does not pin
// memory.
var bufs sync.Pool

const maxPooled = 4 << 20

// getBuffer returns an empty buffer with room for n bytes.
func getBuffer(n int) *[]byte {
	b, _ := bufs.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	*b = (*b)[:0]
	return b
}

func putBuffer(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	bufs.Put(b)
}
