package payload

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// FuzzDecode feeds Decode arbitrary binary payloads (base64-wrapped, so the
// fuzzer explores the header and the msgpack body) and arbitrary strings.
// Decode must never panic, must return only *Error for bad input, and
// anything it accepts must be valid and survive a re-encode unchanged.
func FuzzDecode(f *testing.F) {
	carried := base(framesChunk(2, 2, 1))
	carried.Carried = []Output{{Stage: 0, Kind: engine.KindAudio, Chunks: []engine.Chunk{audioChunk(3)}}}
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
		f.Add(frame(1, 0, r, nil))
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

func mustBePayloadError(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("Decode returned %T %v; bad input must give an *Error", err, err)
	}
	if pe.Code == "" || pe.Message == "" {
		t.Fatalf("Decode returned an *Error without code or message: %+v", pe)
	}
}
