package audio

// 16-bit little-endian PCM to and from samples, by package lebytes (one
// memmove each way on a little-endian host).

import (
	"fmt"
	"slices"

	"github.com/omnistage/omnistage/internal/lebytes"
)

// PCMBytes encodes samples as 16-bit little-endian PCM, the body of a WAV
// file and of a raw "pcm" response.
func PCMBytes(samples []int16) []byte {
	return AppendPCMBytes(make([]byte, 0, 2*len(samples)), samples)
}

// AppendPCMBytes appends samples to dst as 16-bit little-endian PCM.
func AppendPCMBytes(dst []byte, samples []int16) []byte {
	return lebytes.AppendInt16s(dst, samples)
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
	lebytes.ReadInt16s(dst[n:], b)
	return dst, nil
}
