package audio

// 16-bit little-endian PCM to and from samples. On a little-endian host
// samples already are their PCM bytes, so both directions are one memmove;
// a big-endian host converts sample by sample. Both paths are always
// compiled, and the tests run the portable one on every host.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"
)

// nativeLE reports whether the host stores numbers little-endian.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// PCMBytes encodes samples as 16-bit little-endian PCM, the body of a WAV
// file and of a raw "pcm" response.
func PCMBytes(samples []int16) []byte {
	return AppendPCMBytes(make([]byte, 0, 2*len(samples)), samples)
}

// AppendPCMBytes appends samples to dst as 16-bit little-endian PCM.
func AppendPCMBytes(dst []byte, samples []int16) []byte {
	if nativeLE {
		return append(dst, sampleBytes(samples)...)
	}
	return appendPCMBytesPortable(dst, samples)
}

func appendPCMBytesPortable(dst []byte, samples []int16) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 2*len(samples))[:n+2*len(samples)]
	b := dst[n:]
	for i, s := range samples {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(s))
	}
	return dst
}

// PCMSamples decodes 16-bit little-endian PCM. An odd number of bytes is an
// error.
func PCMSamples(b []byte) ([]int16, error) {
	return AppendPCMSamples(nil, b)
}

// AppendPCMSamples appends the samples decoded from b, 16-bit little-endian
// PCM, to dst. An odd number of bytes is an error.
func AppendPCMSamples(dst []int16, b []byte) ([]int16, error) {
	if len(b)%2 != 0 {
		return dst, fmt.Errorf("pcm: odd length %d bytes", len(b))
	}
	n := len(dst)
	dst = slices.Grow(dst, len(b)/2)[:n+len(b)/2]
	if nativeLE {
		copy(sampleBytes(dst[n:]), b)
	} else {
		pcmSamplesPortable(dst[n:], b)
	}
	return dst, nil
}

func pcmSamplesPortable(s []int16, b []byte) {
	for i := range s {
		s[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// sampleBytes returns the memory of s as bytes.
func sampleBytes(s []int16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}
