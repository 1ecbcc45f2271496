package payload

import (
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// FuzzDecode feeds Decode arbitrary binary payloads (base64-wrapped, so the
// fuzzer explores the header and the msgpack body) and arbitrary strings.
// Decode must never panic, must return only *Error for bad input, and
// anything it accepts must be valid and survive a re-encode unchanged; a
// Decoder given the string in parts must do as Decode does.
func FuzzDecode(f *testing.F) {
	carried := base(framesChunk(2, 2, 1))
	carried.Carried = []StageOutput{{Stage: 0, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(3)}}}
	valid := [][]byte{}
	for _, e := range []*Envelope{
		base(textChunk("Hello")),
		base(framesChunk(3, 4, 2)),
		base(segmentsChunk()),
		base(audioChunk(20)),
		base(wordsChunk()),
		base(),
		carried,
	} {
		for _, key := range [][]byte{nil, testKey} {
			s, err := NewCodec(key).Encode(e)
			if err != nil {
				f.Fatal(err)
			}
			valid = append(valid, unwrap(f, s))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, b := range valid {
		f.Add(b)
		f.Add(b[:len(b)/2])                 // truncated
		f.Add(b[:headerLen+1])              // header and one body byte
		f.Add(append(b[:len(b):len(b)], 0)) // extra byte
		for range 4 {                       // bit flips
			c := append([]byte(nil), b...)
			c[rng.IntN(len(c))] ^= 1 << rng.IntN(8)
			f.Add(c)
		}
	}
	for range 8 { // random bytes, with and without a valid header
		r := make([]byte, rng.IntN(64))
		for i := range r {
			r[i] = byte(rng.Uint32())
		}
		f.Add(r)
		f.Add(frame(FormatVersion, 0, r, nil))
	}

	plain := NewCodec(nil, WithMaxSize(1<<20))
	signed := NewCodec(testKey, WithMaxSize(1<<20))
	want := expect(1)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range []string{wrap(b), string(b)} {
			if _, err := signed.Decode(s, want); err != nil {
				mustBePayloadError(t, err)
			}
			e, err := plain.Decode(s, want)
			// Written in parts, the string decodes alike.
			inParts, _, partsErr := decodeInParts(plain, s, want, rand.New(rand.NewPCG(uint64(len(s)), 7)), 9)
			if codeOf(partsErr) != codeOf(err) || !reflect.DeepEqual(inParts, e) {
				t.Fatalf("in parts: %v %+v; whole: %v %+v", partsErr, inParts, err, e)
			}
			if err != nil {
				mustBePayloadError(t, err)
				continue
			}
			if err := e.check(&want); err != nil {
				t.Fatalf("Decode accepted an envelope that fails validation: %v", err)
			}
			again, err := plain.Encode(e)
			if err != nil {
				t.Fatalf("Decode accepted an envelope that Encode refuses: %v", err)
			}
			e2, err := plain.Decode(again, want)
			if err != nil {
				t.Fatalf("re-encoded envelope does not decode: %v", err)
			}
			if !reflect.DeepEqual(e, e2) {
				t.Fatalf("re-encoding changed the envelope:\n%+v\n%+v", e, e2)
			}
		}
	})
}

// FuzzStream feeds a StreamReader arbitrary streams, seeded with valid
// signed and unsigned ones and with damaged copies of them. Reading must
// never panic; a stream must end with io.EOF (an end frame), a *StreamError
// (an error frame) or an *Error (bad input); and a stream that is accepted
// must be written again by a StreamWriter to a stream that reads the same.
func FuzzStream(f *testing.F) {
	var valid [][]byte
	for _, data := range [][]engine.Chunk{
		{textChunk("Hello"), textChunk(" world")},
		{framesChunk(3, 4, 2)},
		{segmentsChunk()},
		{audioChunk(20), audioChunk(3)},
		{wordsChunk()},
		nil,
	} {
		for _, kind := range []FrameKind{FrameHandOff, FrameResult} {
			for _, key := range [][]byte{nil, testKey} {
				var fail *StreamError
				if len(data) == 1 {
					fail = &StreamError{Status: 500, Code: "engine_failed", Message: "the engine failed"}
				}
				valid = append(valid, writeStream(f, NewCodec(key), kind, streamHeader(kind), data, fail))
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, b := range valid {
		f.Add(b)
		f.Add(b[:len(b)/2])                 // truncated
		f.Add(b[:preambleLen+frameHeadLen]) // a frame header alone
		f.Add(append(b[:len(b):len(b)], 0)) // extra byte
		for range 4 {                       // bit flips
			c := append([]byte(nil), b...)
			c[rng.IntN(len(c))] ^= 1 << rng.IntN(8)
			f.Add(c)
		}
	}

	plain := NewCodec(nil, WithMaxSize(1<<20))
	signed := NewCodec(testKey, WithMaxSize(1<<20))
	want := expect(1)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []*Codec{plain, signed} {
			for _, w := range []*Expect{nil, &want} {
				_, _, _, err := readStream(c, b, w)
				mustEndStream(t, err)
			}
		}
		kind, e, cs, err := readStream(plain, b, nil)
		var fail *StreamError
		if err != io.EOF && !errors.As(err, &fail) {
			return
		}
		again := writeStream(t, plain, kind, e, cs, fail)
		kind2, e2, cs2, err2 := readStream(plain, again, nil)
		if kind2 != kind || !reflect.DeepEqual(e2, e) || !reflect.DeepEqual(cs2, cs) || !reflect.DeepEqual(err2, err) {
			t.Fatalf("writing an accepted stream again changed it:\n%c %+v %+v %v\n%c %+v %+v %v", kind, e, cs, err, kind2, e2, cs2, err2)
		}
	})
}

// mustEndStream checks the error that ended a stream read from memory.
func mustEndStream(t *testing.T, err error) {
	t.Helper()
	var se *StreamError
	if err == io.EOF || errors.As(err, &se) {
		return
	}
	mustBePayloadError(t, err)
}

func mustBePayloadError(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %T %v; bad input must give an *Error", err, err)
	}
	if pe.Code == "" || pe.Message == "" {
		t.Fatalf("got an *Error without code or message: %+v", pe)
	}
}

// FuzzBase64 checks the fast base64 of payloads (b64 and decodeBase64)
// against the standard library's, the oracle: the same strings for the same bytes, and for any
// string the same bytes or both an error. Inputs are long enough to reach
// the SIMD part (which takes 32 bytes or more at a time), and the fuzzer
// also places bad characters, line breaks and non-zero trailing bits in
// them.
func FuzzBase64(f *testing.F) {
	long := make([]byte, 200)
	for i := range long {
		long[i] = byte(i * 37)
	}
	f.Add(long, "")
	f.Add(long[:97], "")
	s := stdB64.EncodeToString(long)
	f.Add([]byte(nil), s)
	f.Add([]byte(nil), s[:len(s)-1]+"B")     // non-zero trailing bits
	f.Add([]byte(nil), s[:100]+"\n"+s[100:]) // a line break
	f.Add([]byte(nil), s[:40]+"+"+s[41:])    // a character of the other alphabet
	f.Add([]byte(nil), s[:64]+"="+s[65:])    // padding inside
	f.Fuzz(func(t *testing.T, data []byte, str string) {
		if got, want := b64.EncodeToString(data), stdB64.EncodeToString(data); got != want {
			t.Fatalf("Encode(%x) = %q, want %q", data, got, want)
		}
		got := make([]byte, b64.DecodedLen(len(str)))
		n, err := decodeBase64(got, []byte(str))
		got = got[:n]
		want, stdErr := stdB64.DecodeString(str)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("DecodeString(%q): error %v, the standard library's %v", str, err, stdErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("DecodeString(%q) = %x, want %x", str, got, want)
		}
	})
}
