package httperr

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShort(t *testing.T) {
	if s := Short("voice"); s != "voice" {
		t.Errorf("Short of a short string: %q", s)
	}
	long := strings.Repeat("é", MaxEcho) // 2 bytes each: the cut falls inside one
	s := Short(long)
	if !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || len(s) > MaxEcho+len("…") {
		t.Errorf("Short cut %d bytes to %q", len(long), s)
	}
}
