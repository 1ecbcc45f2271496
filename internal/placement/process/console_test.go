package process

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/pipeline"
)

func TestAnnounceRoundTrip(t *testing.T) {
	cfg, err := pipeline.Builtin("tts")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Announce(&b, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}, cfg); err != nil {
		t.Fatal(err)
	}
	addr, digest, err := parseAnnounce(strings.TrimSuffix(b.String(), "\n"))
	if err != nil || addr != "127.0.0.1:4242" || digest != cfg.Digest() {
		t.Errorf("parsed %q, %x, %v from %q", addr, digest, err, b.String())
	}
}

func TestParseAnnounceRefuses(t *testing.T) {
	for _, line := range []string{
		"",
		"hello",
		announcePrefix + "127.0.0.1:1",
		announcePrefix + "127.0.0.1:1 digest",
		announcePrefix + "127.0.0.1:1 digest abc",
		announcePrefix + "127.0.0.1:1 hash " + strings.Repeat("00", 32),
		announcePrefix + "nowhere digest " + strings.Repeat("00", 32),
	} {
		if addr, _, err := parseAnnounce(line); err == nil {
			t.Errorf("%q: parsed address %q, want an error", line, addr)
		}
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{onLine: func(b []byte) { got = append(got, string(b)) }}
	for _, s := range []string{"one\ntw", "o\r\n", "", "\nthree", strings.Repeat("x", maxLine+3), "\nlast"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	w.flush()
	want := []string{"one", "two", "", "three" + strings.Repeat("x", maxLine-5), strings.Repeat("x", 8), "last"}
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
	c := &console{w: &b, prefix: "w/0: "}
	if c.last() != "" {
		t.Errorf("last of nothing: %q", c.last())
	}
	for i := range tailLines + 3 {
		c.line([]byte{byte('a' + i)})
	}
	if !strings.HasPrefix(b.String(), "w/0: a\nw/0: b\n") {
		t.Errorf("output %q", b.String())
	}
	if last := c.last(); !strings.HasSuffix(last, "\n    m") || strings.Contains(last, "\n    c\n") || !strings.Contains(last, "\n    d\n") {
		t.Errorf("last %q", last)
	}
}
