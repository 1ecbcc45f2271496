package payload

// The numeric slices of chunks (audio samples, frame params and strengths,
// segment times and pitch targets) travel as bin values of little-endian
// elements. On a little-endian host a slice already is its wire form, so it
// is copied as bytes (one memmove each way); a big-endian host converts
// element by element. Samples are 16-bit PCM, converted by package audio. Both paths are always compiled, and the tests run the
// portable one on every host. A reader that owns its input (reader.own)
// reads them in place instead, on a little-endian host.

import (
	"bytes"
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/omnistage/omnistage/internal/audio"
)

// nativeLE reports whether the host stores numbers little-endian.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// bytesOf returns the memory of s as bytes.
func bytesOf(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

// appendFloat32s appends s as little-endian IEEE 754 float32s.
func appendFloat32s(b []byte, s []float32) []byte {
	if nativeLE {
		return append(b, bytesOf(s)...)
	}
	return appendFloat32sPortable(b, s)
}

func appendFloat32sPortable(b []byte, s []float32) []byte {
	for _, v := range s {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// int16sOf returns the little-endian int16s of b, read by r: in r's input
// when r owns it, else in a new slice.
func int16sOf(r *reader, b []byte) []int16 {
	if nativeLE {
		if k := r.inPlace(b, 2); k != nil {
			return unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(k))), len(k)/2)
		}
	}
	return int16sFrom(b)
}

// float32sOf returns the little-endian float32s of b, read by r: in r's
// input when r owns it, else in a new slice.
func float32sOf(r *reader, b []byte) []float32 {
	if nativeLE {
		if k := r.inPlace(b, 4); k != nil {
			return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(k))), len(k)/4)
		}
	}
	return float32sFrom(b)
}

// bytesKept returns b, read by r: itself when r owns its input, else a
// copy.
func bytesKept(r *reader, b []byte) []byte {
	if k := r.inPlace(b, 1); k != nil {
		return k
	}
	return bytes.Clone(b)
}

// int16sFrom returns the little-endian int16s of b, whose length is even,
// in a new slice.
func int16sFrom(b []byte) []int16 {
	s, _ := audio.AppendPCMSamples(make([]int16, 0, len(b)/2), b)
	return s
}

// float32sFrom returns the little-endian float32s of b, whose length is a
// multiple of 4, in a new slice.
func float32sFrom(b []byte) []float32 {
	s := make([]float32, len(b)/4)
	if nativeLE {
		copy(bytesOf(s), b)
	} else {
		float32sPortable(s, b)
	}
	return s
}

func float32sPortable(s []float32, b []byte) {
	for i := range s {
		s[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
