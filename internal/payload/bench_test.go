package payload

import (
	"bytes"
	"io"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/omnistage/omnistage/internal/engine"
)

// benchData are audio-sized payloads: 10 s of 16 kHz int16 audio (320 KB)
// and 10 s of clustergen frames (2000 frames of 26 params and 5 strengths,
// 248 KB). SetBytes counts these raw sample bytes, so MB/s compares across
// encodings.
var benchData = []struct {
	name  string
	bytes int64
	chunk engine.Chunk
}{
	{"audio-10s", 2 * 160000, audioChunk(160000)},
	{"frames-10s", 4 * 2000 * (26 + 5), framesChunk(2000, 26, 5)},
}

var benchKeys = []struct {
	name string
	key  []byte
}{{"unsigned", nil}, {"signed", testKey}}

// BenchmarkEncode measures the stage_input string of /v1/run: Marshal
// plus base64. "new" is Encode, a new string each time; "append" is
// AppendEncode into a buffer that is reused, as a stage server writes its
// answers.
func BenchmarkEncode(b *testing.B) {
	for _, d := range benchData {
		for _, k := range benchKeys {
			c := NewCodec(k.key)
			e := base(d.chunk)
			b.Run(d.name+"/"+k.name+"/new", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					if _, err := c.Encode(e); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(d.name+"/"+k.name+"/append", func(b *testing.B) {
				var buf []byte
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					var err error
					if buf, err = c.AppendEncode(buf[:0], e); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecode measures the stage_input string of /v1/run: base64 plus
// Unmarshal. "new" is Decode, whose envelope keeps a new buffer; "reuse"
// is a Decoder given the string in the parts a body is read in (64 KiB)
// whose buffer goes back to the pool (Release) once the envelope is done
// with, as a stage server's one-shot calls do.
func BenchmarkDecode(b *testing.B) {
	for _, d := range benchData {
		for _, k := range benchKeys {
			c := NewCodec(k.key)
			s, err := c.Encode(base(d.chunk))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(d.name+"/"+k.name+"/new", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					if _, err := c.Decode(s, expect(1)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(d.name+"/"+k.name+"/reuse", func(b *testing.B) {
				in := []byte(s)
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					dec := c.NewDecoder(len(in))
					for p := in; len(p) > 0; {
						n := min(len(p), 64<<10)
						if _, err := dec.Write(p[:n]); err != nil {
							b.Fatal(err)
						}
						p = p[n:]
					}
					if _, err := dec.Decode(expect(1)); err != nil {
						b.Fatal(err)
					}
					dec.Release()
				}
			})
		}
	}
}

// BenchmarkBinary measures the binary payload: Marshal and Unmarshal.
func BenchmarkBinary(b *testing.B) {
	for _, d := range benchData {
		for _, k := range benchKeys {
			c := NewCodec(k.key)
			e := base(d.chunk)
			b.Run(d.name+"/"+k.name+"/marshal", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					if _, err := c.marshal(e); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(d.name+"/"+k.name+"/unmarshal", func(b *testing.B) {
				bin, err := c.marshal(e)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					if _, err := c.unmarshal(bin, expect(1)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// reflectBody is the envelope as msgpack's reflection would encode it from
// struct tags: the numeric slices of engine's chunk types become arrays,
// element by element. It is the baseline of BenchmarkBody.
type reflectBody struct {
	Version int            `msgpack:"v"`
	Data    []engine.Chunk `msgpack:"d"`
}

// BenchmarkBody compares the msgpack body alone, without header, tag and
// base64: "bin" is this package's encoding (samples as little-endian bin),
// "reflect" msgpack's reflection over engine's struct tags.
func BenchmarkBody(b *testing.B) {
	for _, d := range benchData {
		e := base(d.chunk)
		bin := body(b, e)
		ref, err := msgpack.Marshal(&reflectBody{Version: 1, Data: e.Data})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: body %d bytes as bin, %d bytes by reflection", d.name, len(bin), len(ref))
		b.Run(d.name+"/bin/encode", func(b *testing.B) {
			buf := make([]byte, 0, len(bin))
			b.ReportAllocs()
			b.SetBytes(d.bytes)
			for b.Loop() {
				var err error
				if buf, err = encodeMap(envelopeSchema, buf[:0], e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/reflect/encode", func(b *testing.B) {
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			v := &reflectBody{Version: 1, Data: e.Data}
			b.ReportAllocs()
			b.SetBytes(d.bytes)
			for b.Loop() {
				buf.Reset()
				if err := enc.Encode(v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/bin/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(d.bytes)
			for b.Loop() {
				var got Envelope
				if err := decodeMap(envelopeSchema, bin, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(d.name+"/reflect/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(d.bytes)
			for b.Loop() {
				var got reflectBody
				if err := msgpack.Unmarshal(ref, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStream measures the per-frame cost of a payload stream: writing
// and reading data frames of 100 ms of 16 kHz audio (3200 bytes of
// samples). The header is amortized over the frames of one stream.
func BenchmarkStream(b *testing.B) {
	const frames = 100
	chunk := audioChunk(1600)
	hdr := base()
	for _, k := range benchKeys {
		c := NewCodec(k.key)
		var buf bytes.Buffer
		write := func() {
			buf.Reset()
			w := c.NewStreamWriter(&buf)
			if err := w.Header(FrameHandOff, hdr); err != nil {
				b.Fatal(err)
			}
			for range frames {
				if err := w.Data(&chunk); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.End(); err != nil {
				b.Fatal(err)
			}
		}
		read := func(src io.Reader) {
			r := c.NewStreamReader(src)
			want := expect(1)
			if _, _, err := r.Header(&want); err != nil {
				b.Fatal(err)
			}
			for n := 0; ; n++ {
				_, err := r.Next()
				if err == io.EOF {
					if n != frames {
						b.Fatalf("read %d frames", n)
					}
					break
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(k.name+"/write", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				write()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
		})
		b.Run(k.name+"/read", func(b *testing.B) {
			write()
			stream := bytes.Clone(buf.Bytes())
			b.ReportAllocs()
			for b.Loop() {
				read(bytes.NewReader(stream))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
		})
		b.Run(k.name+"/write+read", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				write()
				read(&buf)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
		})
	}
}

// BenchmarkBase64 compares the base64 of payloads with the standard
// library's on the binary payload of 10 s of audio.
func BenchmarkBase64(b *testing.B) {
	bin, err := NewCodec(nil).marshal(base(benchData[0].chunk))
	if err != nil {
		b.Fatal(err)
	}
	text := make([]byte, b64.EncodedLen(len(bin)))
	b64.Encode(text, bin)
	out := make([]byte, len(bin))
	for _, enc := range []struct {
		name   string
		encode func(dst, src []byte)
		decode func(dst, src []byte) (int, error)
	}{{"fast", b64.Encode, decodeBase64}, {"std", stdB64.Encode, stdB64.Decode}} {
		b.Run(enc.name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(len(bin)))
			for b.Loop() {
				enc.encode(text, bin)
			}
		})
		b.Run(enc.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(bin)))
			for b.Loop() {
				if _, err := enc.decode(out, text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
