package payload

import (
	"bytes"
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

func BenchmarkEncode(b *testing.B) {
	for _, d := range benchData {
		for _, k := range benchKeys {
			b.Run(d.name+"/"+k.name, func(b *testing.B) {
				c := NewCodec(k.key)
				e := base(d.chunk)
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					if _, err := c.Encode(e); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, d := range benchData {
		for _, k := range benchKeys {
			b.Run(d.name+"/"+k.name, func(b *testing.B) {
				c := NewCodec(k.key)
				s, err := c.Encode(base(d.chunk))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(d.bytes)
				for b.Loop() {
					if _, err := c.Decode(s, expect(1)); err != nil {
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
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			b.ReportAllocs()
			b.SetBytes(d.bytes)
			for b.Loop() {
				buf.Reset()
				if err := e.EncodeMsgpack(enc); err != nil {
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
				if err := msgpack.Unmarshal(bin, &got); err != nil {
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
