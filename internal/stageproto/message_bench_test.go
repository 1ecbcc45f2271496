package stageproto

import (
	"bytes"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// BenchmarkMessage writes and reads the messages of a chunk's round trip
// (an input or output message of 100 ms of 16 kHz audio, and a credit),
// in memory: what each side spends on a message beyond its system calls.
func BenchmarkMessage(b *testing.B) {
	c := engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, Samples: make([]int16, 1600)}}
	h, data, err := EncodeChunk(c)
	if err != nil {
		b.Fatal(err)
	}
	msg := Chunk{Type: TypeOutput, Job: 12, ChunkHeader: h}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	b.Run("write", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := w.Write(msg, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write-credit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := w.Write(Credit{Type: TypeCredit, Job: 12, Chunks: 4}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	buf.Reset()
	if err := w.Write(msg, data); err != nil {
		b.Fatal(err)
	}
	wire := bytes.Clone(buf.Bytes())
	src := bytes.NewReader(wire)
	r := NewReader(src)
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			src.Reset(wire)
			var h Header
			got, err := r.Read(&h)
			if err != nil || len(got) != len(data) {
				b.Fatal(err)
			}
		}
	})
	b.Run("read+decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			src.Reset(wire)
			var h Header
			got, err := r.Read(&h)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeChunk(&h.ChunkHeader, got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
