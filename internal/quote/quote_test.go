package quote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShort(t *testing.T) {
	if s := Short("voice"); s != "voice" {
		t.Errorf("Short of a short string: %q", s)
	}
	long := strings.Repeat("é", Max) // 2 bytes each: the cut falls inside one
	s := Short(long)
	if !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || len(s) > Max+len("…") {
		t.Errorf("Short cut %d bytes to %q", len(long), s)
	}
}
