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
