package stageproto

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// flatLines are headers for decodeFlat: the first ones it must decode,
// the rest it must leave to encoding/json.
var flatLines = []struct {
	line string
	flat bool
}{
	{`{"type":"output","job":12,"kind":"audio","sample_rate":16000,"data_length":3200}`, true},
	{`{"type":"output","job":12,"kind":"audio","sample_rate":16000,"end_of_sentence":true}`, true},
	{`{"type":"credit","job":1,"chunks":4}`, true},
	{`{"type":"input_end","job":9223372036854775807}`, true},
	{` { "type" : "done" , "job" : -0 , "end_of_sentence" : false } `, true},
	{`{"type":"checked","id":3}`, true},
	{`{"type":"input","job":4,"kind":"image","format":"png","width":640,"height":480,"data_length":9000}`, true},
	{`{}`, true},
	{`{"type":"a","type":"b"}`, true},
	{`{"type":"output","job":1,"kind":"frames","voice":"slt"}`, false},
	{`{"type":"hello","protocol":1}`, false},
	{`{"type":"input","job":1,"kind":"tensor","tensors":[]}`, false},
	{`{"type":"input","job":1,"kind":"image","width":1.5}`, false},
	{`{"type":"out\u0070ut","job":1}`, false},
	{`{"type":"o\"k"}`, false},
	{`{"Type":"done","job":1}`, false},
	{`{"type":"done","job":01}`, false},
	{`{"type":"done","job":1.0}`, false},
	{`{"type":"done","job":1e3}`, false},
	{`{"type":"done","job":9223372036854775808}`, false},
	{`{"type":"done","job":"1"}`, false},
	{`{"type":"done","job":null}`, false},
	{`{"type":"done","end_of_sentence":1}`, false},
	{`{"type":"done","job":1}x`, false},
	{`{"type":"done","job":1,}`, false},
	{`{"type":"done" "job":1}`, false},
	{`{"type":"done","job":`, false},
	{`{"type":"é"}`, false},
	{`["type"]`, false},
	{``, false},
}

// TestDecodeFlat checks decodeFlat against encoding/json on flatLines.
func TestDecodeFlat(t *testing.T) {
	for _, tc := range flatLines {
		var h Header
		if got := decodeFlat([]byte(tc.line), &h); got != tc.flat {
			t.Errorf("%s: decodeFlat = %v; want %v", tc.line, got, tc.flat)
			continue
		}
		if tc.flat {
			checkFlat(t, []byte(tc.line), &h)
		}
	}
}

// checkFlat checks that encoding/json decodes line as decodeFlat did, h.
func checkFlat(t *testing.T, line []byte, h *Header) {
	t.Helper()
	var want Header
	if err := json.Unmarshal(line, &want); err != nil {
		t.Fatalf("%q: decodeFlat took a header encoding/json refuses: %v", line, err)
	}
	if !reflect.DeepEqual(*h, want) {
		t.Fatalf("%q: decodeFlat gives %+v; encoding/json %+v", line, *h, want)
	}
}

// FuzzDecodeFlat checks that whatever decodeFlat takes, encoding/json
// takes too and decodes alike.
func FuzzDecodeFlat(f *testing.F) {
	for _, tc := range flatLines {
		f.Add([]byte(tc.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var h Header
		if decodeFlat(line, &h) {
			checkFlat(t, line, &h)
		}
	})
}

// TestAppendFlat checks appendFlat against json.Marshal: the messages of
// chunks and credit take the fast way, each as json.Marshal writes it, and
// what needs escaping or has other fields takes json's.
func TestAppendFlat(t *testing.T) {
	for _, tc := range []struct {
		v    any
		flat bool
	}{
		{Chunk{Type: TypeOutput, Job: 12, ChunkHeader: ChunkHeader{Kind: "audio", SampleRate: 16000}}, true},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "audio", SampleRate: 22050, EndOfSentence: true}}, true},
		{Chunk{Type: TypeInput, Job: -3, ChunkHeader: ChunkHeader{Kind: "text"}}, true},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "phonemes"}}, true},
		{Chunk{Type: TypeInput}, true},
		{Chunk{Type: TypeOutput, Job: 2, ChunkHeader: ChunkHeader{Kind: "image", Format: "jpeg", Width: 640, Height: 480}}, true},
		{Chunk{Type: TypeOutput, Job: 2, ChunkHeader: ChunkHeader{Kind: "regions", Width: 640, Height: 480}}, true},
		{Credit{Type: TypeCredit, Job: 7, Chunks: 4}, true},
		{JobEvent{Type: TypeInputEnd, Job: 7}, true},
		{JobEvent{Type: TypeCancel, Job: 0}, true},
		{Bare{Type: TypeShutdown}, true},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "a<b"}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "ü"}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "x", Meta: map[string]string{"a": "b"}}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "frames", Voice: "slt", Channels: 2}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "timestamps", Words: []engine.Word{}}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "image", Format: "p\"ng"}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "tensor", Tensors: []TensorField{{Name: "x", DType: "uint8", Shape: []int64{1}}}}}, false},
		{Chunk{Type: TypeInput, Job: 1, ChunkHeader: ChunkHeader{Kind: "regions", Width: 1, Height: 1, Regions: []RegionField{{Box: [][]float32{{0, 0}}}}}}, false},
		{Credit{Type: "cr\"edit"}, false},
		{JobEvent{Type: "a&b"}, false},
		{Bare{Type: "\n"}, false},
		{Hello{Type: TypeHello}, false},
		{Error{Type: TypeError, Job: 1, Message: "x"}, false},
	} {
		got, ok := appendFlat([]byte("x"), tc.v)
		if ok != tc.flat {
			t.Errorf("%#v: appendFlat took it %v; want %v", tc.v, ok, tc.flat)
			continue
		}
		want, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if ok && string(got) != "x"+string(want) {
			t.Errorf("%#v: appendFlat wrote %s; json.Marshal %s", tc.v, got[1:], want)
		}
	}
}
