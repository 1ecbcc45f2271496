package stageproto

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestFraming writes messages and reads them back: headers with and
// without data, data_length added by the writer.
func TestFraming(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	if err := w.Write(JobEvent{Type: TypeInputEnd, Job: 3}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Chunk{Type: TypeInput, Job: 3, ChunkHeader: ChunkHeader{Kind: "text"}}, []byte("hé\nllo")); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), `{"type":"input_end","job":3}`+"\n"+`{"type":"input","job":3,"kind":"text","data_length":7}`+"\n") {
		t.Errorf("wire: %q", b.String())
	}
	r := NewReader(&b)
	var h Header
	if data, err := r.Read(&h); err != nil || h.Type != TypeInputEnd || h.Job != 3 || data != nil {
		t.Fatalf("first: %+v %q %v", h, data, err)
	}
	if data, err := r.Read(&h); err != nil || h.Type != TypeInput || string(data) != "hé\nllo" {
		t.Fatalf("second: %+v %q %v", h, data, err)
	}
	if _, err := r.Read(&h); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestReaderRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", "hello\n", "is not a JSON object"},
		{"no type", `{"job":1}` + "\n", "has no type"},
		{"a field of the wrong type", `{"type":"hello","max_jobs":"4"}` + "\n", "field max_jobs is a JSON string"},
		{"negative data", `{"type":"output","data_length":-1}` + "\n", "announces -1 bytes"},
		{"too much data", `{"type":"output","data_length":99999999999}` + "\n", "the limit is"},
		{"a long header", strings.Repeat("x", MaxHeader+10) + "\n", "longer than"},
		{"data cut short", `{"type":"output","data_length":10}` + "\nabc", "unexpected EOF"},
		{"a header cut short", `{"type":"out`, "unexpected EOF"},
	} {
		var h Header
		_, err := NewReader(strings.NewReader(tc.in)).Read(&h)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
		var pe *ProtocolError
		if strings.Contains(tc.name, "cut short") != (errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &pe)) {
			t.Errorf("%s: %T %v", tc.name, err, err)
		}
	}
}

// TestChunks encodes every kind of chunk and decodes it back.
func TestChunks(t *testing.T) {
	for _, c := range []engine.Chunk{
		{Text: &engine.Text{Text: "Grüße."}},
		{Audio: &engine.Audio{SampleRate: 22050, Samples: []int16{1, -2, 32767, -32768}}},
		{Audio: &engine.Audio{SampleRate: 16000, Samples: []int16{}, EndOfSentence: true}},
		{Words: &engine.Words{Words: []engine.Word{{Word: "$5", CharStart: 2, CharEnd: 4, StartMs: 10, EndMs: 300, Spoken: []string{"five", "dollars"}}}}},
		{Frames: &engine.Frames{Voice: "slt", Channels: 2, StrChannels: 1, FrameShift: 0.005, Params: []float32{1, 2, 3, 4}, Str: []float32{0.5, 0.25}}},
		{Segments: &engine.Segments{Voice: "kal16", Names: []string{"pau", "h"}, Ends: []float32{0.1, 0.2}, Cluster: []bool{false, true}, TargetPos: []float32{0.05}, TargetF0: []float32{110}}},
		{Data: &engine.Data{Kind: "phonemes", Bytes: []byte("h@l'oU"), Meta: map[string]string{"voice": "en-us"}}},
	} {
		h, data, err := EncodeChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeChunk(&h, data)
		if err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
		if c.Audio != nil && len(c.Audio.Samples) == 0 {
			got.Audio.Samples = []int16{}
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: got %+v, want %+v", c.Kind(), got, c)
		}
	}
	for _, tc := range []struct {
		h    ChunkHeader
		data string
		want string
	}{
		{ChunkHeader{}, "", "has no kind"},
		{ChunkHeader{Kind: "audio", SampleRate: 16000}, "abc", "not an even number"},
		{ChunkHeader{Kind: "audio"}, "ab", "sample_rate 0"},
		{ChunkHeader{Kind: "text"}, "\xff", "not UTF-8"},
		{ChunkHeader{Kind: "frames", Channels: 2, StrChannels: 1}, "abcdefgh", "not a whole number"},
	} {
		_, err := DecodeChunk(&tc.h, []byte(tc.data))
		var ie *engine.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an input error with %q", tc.h, err, tc.want)
		}
	}
}
