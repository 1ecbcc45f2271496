package payload

// The numeric slices of chunks (audio samples, frame params and strengths,
// segment times and pitch targets) travel as bin values of little-endian
// elements, converted by package lebytes (one memmove each way on a
// little-endian host). A reader that owns its input (reader.own) reads
// them in place instead, on a little-endian host.

import (
	"bytes"

	"github.com/omnistage/omnistage/internal/lebytes"
)

// int16sOf returns the little-endian int16s of b, read by r: in r's input
// when r owns it, else in a new slice.
func int16sOf(r *reader, b []byte) []int16 {
	if lebytes.NativeLE {
		if k := r.inPlace(b, 2); k != nil {
			if s, ok := lebytes.ViewInt16s(k); ok {
				return s
			}
		}
	}
	return lebytes.Int16s(b)
}

// float32sOf returns the little-endian float32s of b, read by r: in r's
// input when r owns it, else in a new slice.
func float32sOf(r *reader, b []byte) []float32 {
	if lebytes.NativeLE {
		if k := r.inPlace(b, 4); k != nil {
			if s, ok := lebytes.ViewFloat32s(k); ok {
				return s
			}
		}
	}
	return lebytes.Float32s(b)
}

// bytesKept returns b, read by r: itself when r owns its input, else a
// copy.
func bytesKept(r *reader, b []byte) []byte {
	if k := r.inPlace(b, 1); k != nil {
		return k
	}
	return bytes.Clone(b)
}
