// Package lebytes converts slices of numbers (int16 PCM samples, float32s)
// to and from their little-endian bytes, the form they take on every wire
// and in every file the runtime writes. On a little-endian host a slice
// already is its bytes, so a conversion is one memmove, or none: the View
// functions share memory between the two forms. A big-endian host
// converts element by element. Both paths are always compiled, and the
// tests run the portable one on every host.
package lebytes

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"
)

// NativeLE reports whether the host stores numbers little-endian: whether
// the views below exist.
var NativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// AppendInt16s appends s to dst as little-endian int16s.
func AppendInt16s(dst []byte, s []int16) []byte {
	if NativeLE {
		return append(dst, int16Bytes(s)...)
	}
	return appendInt16sPortable(dst, s)
}

// AppendFloat32s appends s to dst as little-endian IEEE 754 float32s.
func AppendFloat32s(dst []byte, s []float32) []byte {
	if NativeLE {
		return append(dst, float32Bytes(s)...)
	}
	return appendFloat32sPortable(dst, s)
}

// ReadInt16s sets each element of dst from the little-endian int16s of b,
// which holds at least 2*len(dst) bytes.
func ReadInt16s(dst []int16, b []byte) {
	b = b[:2*len(dst)]
	if NativeLE {
		copy(int16Bytes(dst), b)
		return
	}
	readInt16sPortable(dst, b)
}

// ReadFloat32s sets each element of dst from the little-endian float32s of
// b, which holds at least 4*len(dst) bytes.
func ReadFloat32s(dst []float32, b []byte) {
	b = b[:4*len(dst)]
	if NativeLE {
		copy(float32Bytes(dst), b)
		return
	}
	readFloat32sPortable(dst, b)
}

// Int16s returns the little-endian int16s of b (whose length is even) in a
// new slice.
func Int16s(b []byte) []int16 {
	s := make([]int16, len(b)/2)
	ReadInt16s(s, b)
	return s
}

// Float32s returns the little-endian float32s of b (whose length is a
// multiple of 4) in a new slice.
func Float32s(b []byte) []float32 {
	s := make([]float32, len(b)/4)
	ReadFloat32s(s, b)
	return s
}

// ViewInt16s returns the little-endian int16s of b in b's own memory, and
// true, when the host is little-endian and b starts at an address that is
// a multiple of 2; nil and false otherwise. An odd last byte is left out.
func ViewInt16s(b []byte) ([]int16, bool) {
	if !NativeLE || !aligned(b, 2) {
		return nil, false
	}
	return unsafe.Slice((*int16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2), true
}

// ViewFloat32s returns the little-endian float32s of b in b's own memory,
// and true, when the host is little-endian and b starts at an address
// that is a multiple of 4; nil and false otherwise. Bytes past the last
// whole float32 are left out.
func ViewFloat32s(b []byte) ([]float32, bool) {
	if !NativeLE || !aligned(b, 4) {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), true
}

// ViewInt16Bytes returns the little-endian bytes of s in s's own memory,
// and true, when the host is little-endian; nil and false otherwise.
func ViewInt16Bytes(s []int16) ([]byte, bool) {
	if !NativeLE {
		return nil, false
	}
	return int16Bytes(s), true
}

// ViewFloat32Bytes returns the little-endian bytes of s in s's own memory,
// and true, when the host is little-endian; nil and false otherwise.
func ViewFloat32Bytes(s []float32) ([]byte, bool) {
	if !NativeLE {
		return nil, false
	}
	return float32Bytes(s), true
}

// aligned reports whether b starts at a multiple of align; an empty b is.
func aligned(b []byte, align uintptr) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align == 0
}

// int16Bytes returns the memory of s as bytes.
func int16Bytes(s []int16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// float32Bytes returns the memory of s as bytes.
func float32Bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

func appendInt16sPortable(dst []byte, s []int16) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 2*len(s))[:n+2*len(s)]
	b := dst[n:]
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return dst
}

func appendFloat32sPortable(dst []byte, s []float32) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 4*len(s))[:n+4*len(s)]
	b := dst[n:]
	for i, v := range s {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return dst
}

func readInt16sPortable(dst []int16, b []byte) {
	for i := range dst {
		dst[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

func readFloat32sPortable(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
