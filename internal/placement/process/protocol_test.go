package process

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
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

// TestChildConfigKeepsProgramBounds: a worker's stage runs in its process
// with one replica and no link of its own, but keeps the bounds an engine
// takes at any placement (engine external's timeout and warm_timeout).
func TestChildConfigKeepsProgramBounds(t *testing.T) {
	cfg := testkit.Parse(t, `
pipeline:
  name: p
  input: text
  stages:
    - {id: 0, name: a, engine: test-a, input: text, output: text, final_output: true}
deploy:
  stages:
    - {id: 0, placement: process, replicas: 2, timeout: 7s, warm_timeout: 9s, health_interval: 3s}
`)
	if err := ChildConfig(cfg, 0); err != nil {
		t.Fatal(err)
	}
	d := cfg.Deploy.Stages[0]
	if d.Placement != pipeline.PlacementInproc || d.Replicas != 1 || d.Link.HealthInterval != 0 {
		t.Errorf("worker stage %+v: want one replica in process, no health checks", d)
	}
	if _, spec := cfg.StageSpec(0, 0); spec.Timeout != 7*time.Second || spec.WarmTimeout != 9*time.Second {
		t.Errorf("worker's engine spec has timeout %s and warm_timeout %s; want 7s and 9s", spec.Timeout, spec.WarmTimeout)
	}
}
