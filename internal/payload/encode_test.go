package payload

// AppendEncode: the stage_input string appended to a buffer the caller
// reuses, the same as Encode's.

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sameString reports whether got and want are the same payload: the same
// string when exact (a signed one's nonce differs), else the same length
// and the same envelope decoded.
func sameString(t *testing.T, c *Codec, got, want string, exact bool) bool {
	t.Helper()
	if exact || len(got) != len(want) {
		return got == want
	}
	g, err := c.Decode(got, expect(1))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Decode(want, expect(1))
	if err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

// TestAppendEncode: AppendEncode appends exactly Encode's string after
// what dst holds (the same payload, signed), signed or not, into a nil, a too small or a roomy
// buffer, which it reuses when the string fits; a failure leaves dst as
// it was.
func TestAppendEncode(t *testing.T) {
	for _, key := range [][]byte{nil, testKey} {
		c := NewCodec(key, WithClock(testClock))
		e := base(audioChunk(3000))
		want, err := c.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, dst := range [][]byte{nil, []byte(`{"x":"`), make([]byte, 2, 2+len(want)), make([]byte, 0, 1<<20)} {
			prefix := string(dst)
			got, err := c.AppendEncode(dst, e)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(got), prefix) || !sameString(t, c, string(got[len(prefix):]), want, key == nil) {
				t.Fatalf("key %v, dst of %d bytes (cap %d): the string appended differs from Encode's", key != nil, len(dst), cap(dst))
			}
			fits := cap(dst)-len(dst) >= len(want)
			if reused := cap(dst) > 0 && &got[:1][0] == &dst[:1][0]; reused != fits {
				t.Errorf("key %v, dst of cap %d: its buffer reused %v, want %v", key != nil, cap(dst), reused, fits)
			}
		}
		dst := []byte("kept")
		got, err := c.AppendEncode(dst, nil)
		if err == nil || string(got) != "kept" {
			t.Errorf("a nil envelope: %q, %v; want dst unchanged and an error", got, err)
		}
		bad := base(audioChunk(3000))
		bad.Pipeline = ""
		if got, err := c.AppendEncode(dst, bad); err == nil || string(got) != "kept" {
			t.Errorf("an envelope without its pipeline: %q, %v; want dst unchanged and an error", got, err)
		}
		big := NewCodec(key, WithMaxSize(1024))
		var pe *Error
		if got, err := big.AppendEncode(dst, e); !errors.As(err, &pe) || pe.Code != CodeTooLarge || !strings.HasPrefix(string(got), "kept") || len(got) != 4 {
			t.Errorf("a payload past MaxSize: %q, %v; want dst unchanged and %s", got, err, CodeTooLarge)
		}
	}
}
