package payload

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
)

var (
	oldKey = []byte("the old payload key, 32 bytes...")
	newKey = []byte("the new payload key, 32 bytes...")
)

func mustRing(t testing.TB, keys ...[]byte) *Ring {
	t.Helper()
	r, err := NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRing(t *testing.T) {
	r := mustRing(t, oldKey, newKey)
	if got, want := r.ids(), []KeyID{KeyID(referenceKeyID(oldKey)), KeyID(referenceKeyID(newKey))}; !reflect.DeepEqual(got, want) {
		t.Errorf("IDs = %v, want %v (oldest first)", got, want)
	}
	if r.Newest() != KeyID(referenceKeyID(newKey)) {
		t.Errorf("Newest = %v, want the last key's id %x", r.Newest(), referenceKeyID(newKey))
	}
	if want := hexID(oldKey) + "," + hexID(newKey); r.String() != want {
		t.Errorf("String = %q, want %q", r, want)
	}
	// A key given twice counts once, at its last place.
	r = mustRing(t, newKey, oldKey, newKey)
	if got, want := r.ids(), []KeyID{KeyID(referenceKeyID(oldKey)), KeyID(referenceKeyID(newKey))}; !reflect.DeepEqual(got, want) {
		t.Errorf("IDs of new, old, new = %v, want %v", got, want)
	}
	for _, bad := range [][][]byte{nil, {oldKey, {}}} {
		if _, err := NewRing(bad...); err == nil {
			t.Errorf("NewRing(%q) accepted", bad)
		}
	}
}

// TestKeyRotation rotates from one key to another the way the README says
// servers should: every reader holds the new key before any writer signs
// with it, and the old key goes once nothing signed with it is in flight.
// At each step, payloads and streams signed with a key the reader holds
// pass, and the others are refused with payload_key_unknown.
func TestKeyRotation(t *testing.T) {
	e := base(textChunk("hi"))
	hdr := streamHeader(FrameHandOff)
	data := []engine.Chunk{textChunk("hi")}
	writer, reader := NewCodec(oldKey), NewCodec(oldKey)
	// read reports the codes with which reader refuses what writer signs
	// now: a payload, then a stream ("" when it takes it).
	read := func(t *testing.T) (payloadCode, streamCode string) {
		t.Helper()
		s, err := writer.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := reader.Decode(s, expect(1)); err != nil {
			payloadCode = codeOf(err)
		} else if !reflect.DeepEqual(got, e) {
			t.Fatalf("decoded %+v", got)
		}
		if _, _, got, err := readStream(reader, writeStream(t, writer, FrameHandOff, hdr, data, nil), nil); err != io.EOF {
			streamCode = codeOf(err)
		} else if !reflect.DeepEqual(got, data) {
			t.Fatalf("read %+v", got)
		}
		return payloadCode, streamCode
	}
	for _, step := range []struct {
		name           string
		writer, reader [][]byte // nil: unchanged
		code           string
	}{
		{"both on the old key", nil, nil, ""},
		{"the writer signs with a key the reader lacks", [][]byte{oldKey, newKey}, nil, CodeKeyUnknown},
		{"the reader takes both", nil, [][]byte{oldKey, newKey}, ""},
		{"the writer back on the old key", [][]byte{newKey, oldKey}, nil, ""},
		{"the writer signs with the new key", [][]byte{oldKey, newKey}, nil, ""},
		{"the old key dropped", [][]byte{newKey}, [][]byte{newKey}, ""},
		{"a writer left on the old key", [][]byte{oldKey}, nil, CodeKeyUnknown},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.writer != nil {
				writer.SetRing(mustRing(t, step.writer...))
			}
			if step.reader != nil {
				reader.SetRing(mustRing(t, step.reader...))
			}
			p, s := read(t)
			if p != step.code || s != step.code {
				t.Fatalf("payload refused with %q, stream with %q; want %q", p, s, step.code)
			}
		})
	}
	// The message names the key and says what to do.
	writer.SetRing(mustRing(t, oldKey))
	s, err := writer.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reader.Decode(s, expect(1))
	want := "payload is signed with payload key " + hexID(oldKey) + ", which this server does not hold (its keys: " + hexID(newKey) + "); give every stage server the same payload key files (--payload-key-file)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v; want %q", err, want)
	}
}

// TestSetRingConcurrently swaps a codec's ring while payloads and streams
// are written and read with it (run with -race): every one that is
// written is signed with a key that every ring holds, so all are read.
func TestSetRingConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := NewCodec(oldKey)
	rings := []*Ring{mustRing(t, oldKey, newKey), mustRing(t, newKey, oldKey)}
	c.SetRing(rings[0])
	e := base(audioChunk(100))
	hdr := streamHeader(FrameHandOff)
	data := []engine.Chunk{audioChunk(100)}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 200 {
				s, err := c.Encode(e)
				if err == nil {
					_, err = c.Decode(s, expect(1))
				}
				if err == nil {
					var w bytes.Buffer
					sw := c.NewStreamWriter(&w)
					if err = sw.Header(FrameHandOff, hdr); err == nil {
						if err = sw.Data(&data[0]); err == nil {
							err = sw.End()
						}
					}
					if err == nil {
						if _, _, _, err = readStream(c, w.Bytes(), nil); err == io.EOF {
							err = nil
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 1000 {
		c.SetRing(rings[i%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestExpiry checks the lifetime of payloads and streams with an injected
// clock: a reader takes what was issued up to its lifetime ago and up to
// ClockSkew in the future, and refuses the rest, saying why.
func TestExpiry(t *testing.T) {
	const lifetime = 10 * time.Minute
	issued := testIssued
	now := issued
	writer := NewCodec(testKey, WithClock(func() time.Time { return issued }))
	reader := NewCodec(testKey, WithLifetime(lifetime), WithClock(func() time.Time { return now }))
	forever := NewCodec(testKey, WithClock(func() time.Time { return now }))
	e := base(textChunk("hi"))
	hdr := streamHeader(FrameHandOff)
	data := []engine.Chunk{textChunk("hi")}
	s, err := writer.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	stream := writeStream(t, writer, FrameHandOff, hdr, data, nil)
	for _, tc := range []struct {
		name string
		age  time.Duration // now - issued
		code string
		msg  string
	}{
		{"just issued", 0, "", ""},
		{"at the end of its lifetime", lifetime, "", ""},
		{"a millisecond too old", lifetime + time.Millisecond, CodeExpired, "issued 10m0.001s ago, longer than this server's payload lifetime of 10m0s (--payload-lifetime)"},
		{"a day old", 24 * time.Hour, CodeExpired, "issued 24h0m0s ago"},
		{"from the future within the skew", -ClockSkew, "", ""},
		{"from too far in the future", -ClockSkew - time.Millisecond, CodeFromFuture, "issued 30.001s in the future by this server's clock, more than the 30s allowed for clock skew; synchronize the clocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = issued.Add(tc.age)
			_, perr := reader.Decode(s, expect(1))
			_, _, _, serr := readStream(reader, stream, nil)
			if serr == io.EOF {
				serr = nil
			}
			for what, err := range map[string]error{"payload": perr, "payload stream": serr} {
				if tc.code == "" {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					continue
				}
				var pe *Error
				if !errors.As(err, &pe) || pe.Code != tc.code || !strings.HasPrefix(pe.Message, what+" was ") || !strings.Contains(pe.Message, tc.msg) {
					t.Errorf("%s: error %v; want %s containing %q", what, err, tc.code, tc.msg)
				}
			}
			// Without a lifetime, nothing expires.
			if _, err := forever.Decode(s, expect(1)); err != nil {
				t.Errorf("a codec without a lifetime refuses: %v", err)
			}
			if _, _, _, err := readStream(forever, stream, nil); err != io.EOF {
				t.Errorf("a codec without a lifetime refuses the stream: %v", err)
			}
		})
	}
}

// TestExpiryAfterSignature checks that the issued-at time is signed: a
// payload whose time was moved is refused as altered, not as expired or
// accepted.
func TestExpiryAfterSignature(t *testing.T) {
	writer := NewCodec(testKey, WithClock(testClock))
	reader := NewCodec(testKey, WithLifetime(time.Minute), WithClock(func() time.Time { return testIssued.Add(time.Hour) }))
	b, err := writer.marshal(base(textChunk("hi")))
	if err != nil {
		t.Fatal(err)
	}
	// An hour later, by the reader's clock.
	copy(b[6+keyIDLen:], stamp(nil, testIssued.Add(time.Hour))[keyIDLen:])
	if _, err := reader.unmarshal(b, expect(1)); codeOf(err) != CodeSignatureInvalid {
		t.Fatalf("a payload with a moved issued-at time: %v; want %s", err, CodeSignatureInvalid)
	}
}
