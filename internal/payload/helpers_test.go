package payload

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/omnistage/omnistage/internal/engine"
)

var (
	testKey    = []byte("test key: 32 bytes of something.")
	testDigest = sha256.Sum256([]byte("tts pipeline, route 0 1 2"))
	testTrace  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	// testIssued is when the payloads and streams that tests build by
	// hand were issued, and the time of testClock.
	testIssued = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
)

// testClock is a clock that shows testIssued.
func testClock() time.Time { return testIssued }

// referenceKeyID is the id of key as the package documentation defines
// it, written out independently of keys.go: the first 8 bytes of HKDF of
// the key with no salt and the info "omnistage key id\x00"; zeros for no
// key.
func referenceKeyID(key []byte) []byte {
	if key == nil {
		return make([]byte, 8)
	}
	id, err := hkdf.Key(sha256.New, key, nil, "omnistage key id\x00", 8)
	if err != nil {
		panic(err)
	}
	return id
}

// stamp returns the key id of key and the issued-at time at, as a payload
// header and a stream preamble hold them.
func stamp(key []byte, at time.Time) []byte {
	return binary.BigEndian.AppendUint64(referenceKeyID(key), uint64(at.UnixMilli()))
}

// expect is what the server of stage id of the test pipeline knows: three
// stage ids (talker, vocoder, aligner).
func expect(id int) Expect {
	return Expect{Pipeline: "tts", Digest: testDigest, Stage: id, NumStages: 3}
}

// base returns a valid envelope from stage 0 to stage 1 carrying data.
func base(data ...engine.Chunk) *Envelope {
	return &Envelope{
		Version:    FormatVersion,
		Pipeline:   "tts",
		Digest:     testDigest,
		TransferID: "tr-7f3a",
		RequestID:  "r1",
		From:       0,
		To:         1,
		Params:     []json.RawMessage{json.RawMessage(`{"voice":"slt"}`), nil, json.RawMessage(`null`)},
		Prompt:     engine.Prompt{Text: "Hello world."},
		Outputs:    []string{"audio", "timestamps"},
		Final:      2,
		Data:       data,
	}
}

// spanned is c with the span of sentence n, text at code point start.
func spanned(c engine.Chunk, n, start int, text string) engine.Chunk {
	c.Span = &engine.Span{Sentence: n, Start: start, End: start + utf8.RuneCountInString(text), Text: text}
	return c
}

func textChunk(s string) engine.Chunk { return engine.Chunk{Text: &engine.Text{Text: s}} }

func audioChunk(n int) engine.Chunk {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(12000 * math.Sin(float64(i)*0.05))
	}
	s[0], s[n-1] = math.MinInt16, math.MaxInt16
	return engine.Chunk{Audio: &engine.Audio{SampleRate: 16000, Samples: s}}
}

func framesChunk(frames, channels, strChannels int) engine.Chunk {
	f := &engine.Frames{Voice: "slt", Channels: channels, StrChannels: strChannels, FrameShift: 0.005}
	f.Params = make([]float32, frames*channels)
	for i := range f.Params {
		f.Params[i] = float32(math.Cos(float64(i))) * 3
	}
	f.Str = make([]float32, frames*strChannels)
	for i := range f.Str {
		f.Str[i] = float32(i%7) / 7
	}
	if strChannels == 0 {
		f.Str = nil
	}
	return engine.Chunk{Frames: f}
}

func segmentsChunk() engine.Chunk {
	return engine.Chunk{Segments: &engine.Segments{
		Voice:     "kal",
		Names:     []string{"pau", "hh", "ax", "l", "ow", "pau"},
		Ends:      []float32{0.1, 0.16, 0.22, 0.3, 0.45, 0.6},
		Cluster:   []bool{false, true, false, false, true, false},
		TargetPos: []float32{0.0, 0.3, 0.6},
		TargetF0:  []float32{110, 130, 95.5},
	}}
}

func wordsChunk() engine.Chunk {
	return engine.Chunk{Words: &engine.Words{Words: []engine.Word{
		{Word: "hello", StartMs: 0, EndMs: 420}, {Word: "wörld", StartMs: 430, EndMs: 900},
	}}}
}

// frame builds the binary payload of body: header with flags, the id of
// key and testIssued, body, and a seal (an all-zero nonce and a tag) made
// with key when key is not nil.
func frame(version, flags byte, body, key []byte) []byte {
	b := append([]byte(magic), version, flags)
	b = append(b, stamp(key, testIssued)...)
	b = append(b, body...)
	if key != nil {
		b = append(b, referenceSeal(key, b, make([]byte, nonceLen))...)
	}
	return b
}

// raw encodes e without validating it, so tests can build payloads that
// Encode refuses.
func raw(t testing.TB, e *Envelope, key []byte) string {
	t.Helper()
	var flags byte
	if key != nil {
		flags = flagSigned
	}
	return stdB64.EncodeToString(frame(FormatVersion, flags, body(t, e), key))
}

// rawSigned is raw for a payload signed with key.
func rawSigned(t testing.TB, key []byte, e *Envelope) string {
	t.Helper()
	return stdB64.EncodeToString(frame(FormatVersion, flagSigned, body(t, e), key))
}

// hexID is the key id of key in hex, as messages show it.
func hexID(key []byte) string { return hex.EncodeToString(referenceKeyID(key)) }

// body returns the msgpack body of e.
func body(t testing.TB, e *Envelope) []byte {
	t.Helper()
	b, err := encodeMap(envelopeSchema, nil, e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit decodes the body of e into a generic map, lets change edit it, and
// returns the re-encoded payload: for bodies with wrong types, unknown or
// missing keys.
func edit(t testing.TB, e *Envelope, change func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := msgpack.Unmarshal(body(t, e), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return stdB64.EncodeToString(frame(FormatVersion, 0, b, nil))
}

// unwrap returns the binary payload of a stage_input string.
func unwrap(t testing.TB, s string) []byte {
	t.Helper()
	b, err := stdB64.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wrap(b []byte) string { return stdB64.EncodeToString(b) }

// dataChunk is a chunk of a kind a pipeline declares.
func dataChunk(kind, bytes string, meta map[string]string) engine.Chunk {
	d := &engine.Data{Kind: engine.Kind(kind), Meta: meta}
	if bytes != "" {
		d.Bytes = []byte(bytes)
	}
	return engine.Chunk{Data: d}
}

func tensorsChunk() engine.Chunk {
	x := engine.Float32Tensor("x", []int64{1, 3, 2, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	ids := engine.Tensor{Name: "ids", Type: engine.Int64, Shape: []int64{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}}
	return engine.Chunk{Tensors: &engine.Tensors{Tensors: []engine.Tensor{x, ids}}}
}

func imageChunk() engine.Chunk {
	return engine.Chunk{Image: &engine.Image{Format: "png", Width: 2, Height: 1, Bytes: []byte("\x89PNG not really")}}
}

func regionsChunk() engine.Chunk {
	box := [4]engine.Point{{X: 1, Y: 2}, {X: 30, Y: 2.5}, {X: 30, Y: 12}, {X: 1, Y: 11.5}}
	return engine.Chunk{Regions: &engine.Regions{Width: 40, Height: 20, Regions: []engine.Region{
		{Index: 0, Box: box, Score: 0.9, Crop: &engine.Crop{Width: 2, Height: 1, Pixels: []byte{1, 2, 3, 4, 5, 6}}},
		{Index: 1, Box: box, Score: 0.7, Rotated: true, Text: "Hé", Confidence: []float32{0.99, 0.5}},
	}}}
}
