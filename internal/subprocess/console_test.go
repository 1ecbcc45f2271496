package subprocess

import (
	"bytes"
	"strings"
	"testing"
)

func TestLineWriter(t *testing.T) {
	var got []string
	w := &LineWriter{OnLine: func(b []byte) { got = append(got, string(b)) }}
	for _, s := range []string{"one\ntw", "o\r\n", "", "\nthree", strings.Repeat("x", MaxLine+3), "\nlast"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	w.Flush()
	want := []string{"one", "two", "", "three" + strings.Repeat("x", MaxLine-5), strings.Repeat("x", 8), "last"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.20q (%d bytes), want %.20q (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
	}
}

func TestConsoleKeepsTheLastLines(t *testing.T) {
	var b bytes.Buffer
	c := NewConsole(&b, "w/0: ")
	if c.Last() != "" {
		t.Errorf("last of nothing: %q", c.Last())
	}
	for i := range TailLines + 3 {
		c.Line([]byte{byte('a' + i)})
	}
	if !strings.HasPrefix(b.String(), "w/0: a\nw/0: b\n") {
		t.Errorf("output %q", b.String())
	}
	if last := c.Last(); !strings.HasSuffix(last, "\n    m") || strings.Contains(last, "\n    c\n") || !strings.Contains(last, "\n    d\n") {
		t.Errorf("last %q", last)
	}
}
