package wyoming

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
)

var testLimits = limits{header: 256, data: 64, payload: 32}

// TestReaderEvents reads well-formed streams: data in the header, in a
// data section merged over the header's, payloads, blank lines between
// events, null lengths.
func TestReaderEvents(t *testing.T) {
	cases := []struct {
		name, in string
		want     []event
	}{
		{"bare", `{"type":"describe"}` + "\n", []event{{Type: "describe"}}},
		{"inline data", `{"type":"synthesize","data":{"text":"hi"}}` + "\n", []event{{Type: "synthesize", Data: raws(`{"text":"hi"}`)}}},
		{"data section merged over the header's", `{"type":"x","data":{"a":1,"b":2},"data_length":7}` + "\n" + `{"b":3}`,
			[]event{{Type: "x", Data: raws(`{"a":1,"b":3}`)}}},
		{"payload", `{"type":"audio-chunk","data_length":2,"payload_length":4}` + "\n{}abcd", []event{{Type: "audio-chunk", Data: raws(`{}`), Payload: []byte("abcd")}}},
		{"null lengths and a version", `{"type":"x","data":null,"data_length":null,"payload_length":null,"version":"1.7.0"}` + "\n", []event{{Type: "x"}}},
		{"blank lines", "\n  \n" + `{"type":"a"}` + "\n\n" + `{"type":"b"}` + "\n", []event{{Type: "a"}, {Type: "b"}}},
		{"crlf", `{"type":"a"}` + "\r\n", []event{{Type: "a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReader(strings.NewReader(tc.in), testLimits)
			for _, want := range tc.want {
				got, err := r.read()
				if err != nil {
					t.Fatal(err)
				}
				if !sameEvent(got, want) {
					t.Fatalf("got %+v, want %+v", got, want)
				}
			}
			if _, err := r.read(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the events: %v, want io.EOF", err)
			}
		})
	}
}

// TestReaderRefuses: each malformed event is a frameError; unless fatal,
// the event after it is read whole.
func TestReaderRefuses(t *testing.T) {
	next := `{"type":"ping"}` + "\n"
	cases := []struct {
		name, in, want string
		fatal          bool
	}{
		{"not JSON", "hello there\n", "not a JSON object", false},
		{"a JSON array", "[1,2]\n", "not a JSON object", false},
		{"no type", `{"data":{"a":1}}` + "\n", "has no type", false},
		{"type not a string", `{"type":7,"data_length":2}` + "\n{}", "has no type", false},
		{"empty type, its data skipped", `{"type":"","data_length":5,"payload_length":3}` + "\n{\"a\"}xyz", "has no type", false},
		{"data not an object", `{"type":"x","data":[1]}` + "\n", "header's data is not a JSON object", false},
		{"data section not JSON", `{"type":"x","data_length":3}` + "\nabc", "are not a JSON object", false},
		{"data section over the limit", `{"type":"x","data_length":100,"payload_length":2}` + "\n" + strings.Repeat("a", 100) + "pp", "over the limit of 64", false},
		{"payload over the limit", `{"type":"x","payload_length":40}` + "\n" + strings.Repeat("p", 40), "over the limit of 32", false},
		{"header over the limit", `{"type":"x","data":"` + strings.Repeat("a", 600) + `"}` + "\n", "longer than the limit of 256", false},
		{"negative length", `{"type":"x","data_length":-1}` + "\n", "not a length", true},
		{"string length", `{"type":"x","payload_length":"5"}` + "\n", "not a length", true},
		{"fractional length", `{"type":"x","data_length":1.5}` + "\n", "not a length", true},
		{"a length past what can be skipped", `{"type":"x","payload_length":99999999999}` + "\n", "the connection ends", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReader(strings.NewReader(tc.in+next), testLimits)
			_, err := r.read()
			var fe *frameError
			if !errors.As(err, &fe) || fe.fatal != tc.fatal || !strings.Contains(fe.msg, tc.want) {
				t.Fatalf("got %v (%+v); want a frameError, fatal %v, saying %q", err, fe, tc.fatal, tc.want)
			}
			if tc.fatal {
				return
			}
			ev, err := r.read()
			if err != nil || ev.Type != "ping" {
				t.Fatalf("the event after: %+v %v; want the ping", ev, err)
			}
		})
	}
}

// TestReaderEOF: a stream that ends inside an event is an unexpected EOF.
func TestReaderEOF(t *testing.T) {
	for _, in := range []string{`{"type":"x"`, `{"type":"x","data_length":10}` + "\n{}", `{"type":"x","payload_length":4}` + "\nab"} {
		if _, err := newReader(strings.NewReader(in), testLimits).read(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, want io.ErrUnexpectedEOF", in, err)
		}
	}
}

// TestWriterFraming: the writer's events have the type, the version, the
// data in a section of the length announced, and the payload.
func TestWriterFraming(t *testing.T) {
	var buf bytes.Buffer
	w := newWriter(&buf, nil, 0)
	if err := w.write(typeError, errorData{Text: "dépassé \"x\"", Code: "c"}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := w.writeRaw(typeAudioChunk, appendAudioData(nil, 16000, 5), []byte{1, 2, 3, 4}, false); err != nil {
		t.Fatal(err)
	}
	if err := w.write(typeSynthesizeStopped, nil, nil, true); err != nil {
		t.Fatal(err)
	}
	lines := buf.String()
	first, rest, _ := strings.Cut(lines, "\n")
	var h map[string]any
	if err := json.Unmarshal([]byte(first), &h); err != nil {
		t.Fatal(err)
	}
	section := `{"text":"dépassé \"x\"","code":"c"}`
	if h["type"] != "error" || h["version"] != ProtocolVersion || h["data_length"] != float64(len(section)) || h["payload_length"] != nil {
		t.Errorf("header %v", h)
	}
	if !strings.HasPrefix(rest, section) {
		t.Errorf("data section %q, want %q", rest, section)
	}
	r := newReader(strings.NewReader(lines), limits{header: 1024, data: 1024, payload: 1024})
	for _, want := range []event{
		{Type: "error", Data: raws(section)},
		{Type: "audio-chunk", Data: raws(`{"rate":16000,"width":2,"channels":1,"timestamp":5}`), Payload: []byte{1, 2, 3, 4}},
		{Type: "synthesize-stopped"},
	} {
		got, err := r.read()
		if err != nil || !sameEvent(got, want) {
			t.Fatalf("read back %+v %v, want %+v", got, err, want)
		}
	}
}

// FuzzReader: no input makes the reader panic, take more than its limits
// or stop framing after an event it can read past.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"type":"describe"}` + "\n",
		`{"type":"x","data":{"a":1},"data_length":7,"payload_length":2}` + "\n" + `{"b":3}pp`,
		`{"type":"x","data_length":-1}` + "\n",
		"junk\n" + `{"type":"ping"}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newReader(bytes.NewReader(in), testLimits)
		for range 64 {
			ev, err := r.read()
			var fe *frameError
			switch {
			case err == nil:
				if ev.Type == "" || len(ev.Payload) > testLimits.payload {
					t.Fatalf("event %+v", ev)
				}
			case errors.As(err, &fe) && !fe.fatal:
			default:
				return
			}
		}
	})
}

// BenchmarkAudioChunk writes 100 ms audio-chunks at 16 kHz, the server's
// hot path: each chunk's data, then the event, flushed.
func BenchmarkAudioChunk(b *testing.B) {
	samples := make([]int16, 1600)
	w := newWriter(io.Discard, nil, 0)
	var data, pcm []byte
	b.ReportAllocs()
	b.SetBytes(2 * int64(len(samples)))
	for i := range b.N {
		data = appendAudioData(data[:0], 16000, int64(i)*100)
		pcm = audio.AppendPCMBytes(pcm[:0], samples)
		if err := w.writeRaw(typeAudioChunk, data, pcm, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadEvent reads a synthesize-chunk, the event a stream's text
// comes in.
func BenchmarkReadEvent(b *testing.B) {
	var buf bytes.Buffer
	w := newWriter(&buf, nil, 0)
	if err := w.write(typeSynthesizeChunk, map[string]string{"text": "the next few words of an answer "}, nil, true); err != nil {
		b.Fatal(err)
	}
	ev := buf.Bytes()
	in := bytes.NewReader(nil)
	r := newReader(in, limits{header: 1024, data: 1024, payload: 1024})
	b.ReportAllocs()
	for range b.N {
		in.Reset(ev)
		r.br.Reset(in)
		if _, err := r.read(); err != nil {
			b.Fatal(err)
		}
	}
}

func raws(obj string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		panic(err)
	}
	return m
}

func sameEvent(a, b event) bool {
	if a.Type != b.Type || !bytes.Equal(a.Payload, b.Payload) || len(a.Data) != len(b.Data) {
		return false
	}
	for k, v := range a.Data {
		var x, y any
		if json.Unmarshal(v, &x) != nil || json.Unmarshal(b.Data[k], &y) != nil {
			return false
		}
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if !bytes.Equal(xb, yb) {
			return false
		}
	}
	return true
}
