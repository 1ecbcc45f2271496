package subprocess

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestConsoleLimit checks the limit's token bucket: a burst goes through,
// lines past it are dropped but kept for the error, and the next line
// that fits, once time has refilled the bucket, comes after the count of
// bytes dropped.
func TestConsoleLimit(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1000, 0)
	c := NewConsole(&b, "p: ")
	c.now = func() time.Time { return now }
	c.Limit("standard error", 100, 40) // "p: " + 6 bytes + newline: 10 bytes a line
	line := func(s string) { c.Line([]byte(s)) }
	for i := range 6 {
		line(fmt.Sprintf("line %d", i))
	}
	if got, want := b.String(), "p: line 0\np: line 1\np: line 2\np: line 3\n"; got != want {
		t.Fatalf("a burst of 40 bytes wrote %q; want %q", got, want)
	}
	b.Reset()
	now = now.Add(50 * time.Millisecond) // 5 bytes: not enough
	line("line 6")
	now = now.Add(100 * time.Millisecond) // 15 bytes
	line("line 7")
	if got, want := b.String(), "p: 21 bytes of standard error dropped (past the limit of 100 bytes per second)\np: line 7\n"; got != want {
		t.Errorf("after the refill: %q; want %q", got, want)
	}
	if tail := c.Tail(); len(tail) != 8 || tail[4] != "line 4" || tail[7] != "line 7" {
		t.Errorf("tail %q: want every line, those dropped too", tail)
	}
	b.Reset()
	line("line 8") // 5 bytes left: dropped
	c.Note("lost: it crashed")
	c.Flush()
	if got, want := b.String(), "p: 7 bytes of standard error dropped (past the limit of 100 bytes per second)\np: lost: it crashed\n"; got != want {
		t.Errorf("a note: %q; want %q", got, want)
	}
	// A flood of a million lines in an instant writes the bucket's worth
	// (and a count).
	b.Reset()
	now = now.Add(time.Hour)
	for range 1_000_000 {
		line("flood!")
	}
	c.Flush()
	if b.Len() > 40+100 {
		t.Errorf("a flood wrote %d bytes: %q", b.Len(), b.String())
	}
}

// TestConsoleSustainedFlood checks a flood of 10 MB a second for 10 s
// against the limit of a stage's standard error: what is written stays
// within the bucket's burst and rate, counts included, in runs of lines
// with a count before each, not a count between every two lines.
func TestConsoleSustainedFlood(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(1000, 0)
	c := NewConsole(&b, "stage synth/0 (pid 42): ")
	c.now = func() time.Time { return now }
	const rate, burst = 64 << 10, 256 << 10
	c.Limit("standard error", rate, burst)
	line := bytes.Repeat([]byte("f"), 99)
	for range 1_000_000 {
		c.Line(line)
		now = now.Add(10 * time.Microsecond)
	}
	c.Flush()
	if max := burst + 10*rate; b.Len() > max {
		t.Errorf("wrote %d bytes in 10 s; want at most %d", b.Len(), max)
	}
	if b.Len() < 10*rate {
		t.Errorf("wrote %d bytes in 10 s; want about the rate's %d", b.Len(), 10*rate)
	}
	n := strings.Count(b.String(), "bytes of standard error dropped")
	t.Logf("%d bytes, %d counts", b.Len(), n)
	if n < 5 || n > 11 {
		t.Errorf("%d counts of dropped bytes in 10 s; want one a run of lines, about a second apart", n)
	}
}

func TestConsoleTailRing(t *testing.T) {
	c := NewConsole(io.Discard, "")
	for i := range 3*TailLines + 4 {
		c.Line([]byte(strconv.Itoa(i)))
	}
	tail := c.Tail()
	if len(tail) != TailLines || tail[0] != strconv.Itoa(2*TailLines+4) || tail[TailLines-1] != strconv.Itoa(3*TailLines+3) {
		t.Errorf("tail %q", tail)
	}
}
