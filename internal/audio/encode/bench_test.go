package encode

import (
	"io"
	"testing"
)

// BenchmarkEncode encodes 10 s of 16 kHz speech-like audio in 100 ms
// Writes, as a streamed response would: xRT is seconds of audio encoded
// per second, out-B/s the encoded bytes per second of audio.
func BenchmarkEncode(b *testing.B) {
	const rate, seconds = 16000, 10
	one := testSignal(rate)
	in := make([]int16, 0, rate*seconds)
	for len(in) < cap(in) {
		in = append(in, one[:min(len(one), cap(in)-len(in))]...)
	}
	for _, format := range Formats() {
		b.Run(format, func(b *testing.B) {
			if format == AAC {
				needTool(b, "ffmpeg")
			}
			var out countWriter
			b.SetBytes(int64(2 * len(in)))
			b.ReportAllocs()
			for b.Loop() {
				out = 0
				e, err := New(format, &out, rate, Options{Stream: true})
				if err != nil {
					b.Fatal(err)
				}
				for s := in; len(s) > 0; {
					n := min(rate/10, len(s))
					if err := e.Write(s[:n]); err != nil {
						b.Fatal(err)
					}
					s = s[n:]
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(seconds*b.N)/b.Elapsed().Seconds(), "xRT")
			b.ReportMetric(float64(out)/seconds, "out-B/s")
		})
	}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)
