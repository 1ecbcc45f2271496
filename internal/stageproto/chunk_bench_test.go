package stageproto

import (
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// BenchmarkChunkCodec encodes a chunk to its header fields and data and
// decodes it back, as the two sides of a stage connection do per chunk:
// 100 ms of 16 kHz audio, and a second of clustergen frames (200 frames
// of 26 params and 5 strengths).
func BenchmarkChunkCodec(b *testing.B) {
	frames := &engine.Frames{Voice: "slt", Channels: 26, StrChannels: 5, FrameShift: 0.005,
		Params: make([]float32, 200*26), Str: make([]float32, 200*5)}
	for i := range frames.Params {
		frames.Params[i] = float32(i) / 7
	}
	samples := make([]int16, 1600)
	for i := range samples {
		samples[i] = int16(i * 37)
	}
	for _, tc := range []struct {
		name string
		c    engine.Chunk
	}{
		{"audio", engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, Samples: samples}}},
		{"frames", engine.Chunk{Frames: frames}},
	} {
		b.Run(tc.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := EncodeChunk(tc.c); err != nil {
					b.Fatal(err)
				}
			}
		})
		h, data, err := EncodeChunk(tc.c)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				// The reader hands each message's data over in a new slice.
				if _, err := DecodeChunk(&h, append([]byte(nil), data...)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
