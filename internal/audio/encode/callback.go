package encode

// The functions libopusenc and libFLAC call back into. They are here, apart
// from the C code that calls them, because a file that exports functions
// cannot define any in its preamble.

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"io"
	"runtime/cgo"
	"unsafe"
)

// cBytes returns the n bytes at p, C memory, as a slice that must not
// outlive the callback.
func cBytes(p *C.uchar, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), n)
}

// encodeOpusWrite is libopusenc's write callback: it writes a page to the
// encoder h, and returns nonzero on failure.
//
//export encodeOpusWrite
func encodeOpusWrite(h C.uintptr_t, p *C.uchar, n C.int32_t) C.int {
	e := cgo.Handle(h).Value().(*opusEncoder)
	if e.write(cBytes(p, int(n))) != nil {
		return 1
	}
	return 0
}

// encodeFLACWrite is libFLAC's write callback: it writes bytes to the
// encoder h, and returns nonzero on failure.
//
//export encodeFLACWrite
func encodeFLACWrite(h C.uintptr_t, p *C.uchar, n C.size_t) C.int {
	e := cgo.Handle(h).Value().(*flacEncoder)
	if e.write(cBytes(p, int(n))) != nil {
		return 1
	}
	return 0
}

// sink writes what a C library hands its callback to w.
type sink struct {
	w      io.Writer
	format string
	buf    []byte
	err    error // the first error of the encoder that embeds the sink
}

// write copies b, C memory the library reuses, so that w never sees it, and
// writes it to w. After an error it writes nothing and returns the error.
func (s *sink) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(s.buf[:0], b...)
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = fmt.Errorf("encode: %s: %w", s.format, err)
	}
	return s.err
}
