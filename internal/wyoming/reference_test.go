package wyoming

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestReferenceClient drives the server with the protocol's reference
// library (Python's wyoming), the way Home Assistant's integration does:
// describe, a synthesize, and a stream written by one task (with the
// whole text again before the stop) while another reads. It runs where
// python3 can import wyoming.
func TestReferenceClient(t *testing.T) {
	if err := exec.Command("python3", "-c", "import wyoming.client, wyoming.tts").Run(); err != nil {
		t.Skip("python3 cannot import the wyoming library here")
	}
	f := serve(t, Options{})
	host, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		t.Fatal(err)
	}
	text := "Turning on the lights. It is 21 degrees! Anything else"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "python3", "testdata/reference_client.py", host, port, "bob", text).Output()
	if err != nil {
		t.Fatalf("the client: %v\n%s", err, out)
	}
	type heardBy struct {
		Error  string
		Format []int
		Starts int
		Bytes  int
		SHA256 string
	}
	var got struct {
		Describe struct {
			Program   string
			Streaming bool
			Voices    []struct {
				Name        string
				Languages   []string
				Description string
			}
		}
		Whole, Streamed heardBy
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	d := got.Describe
	if d.Program != "omnistage" || !d.Streaming || len(d.Voices) != 4 || d.Voices[1].Name != "bob" ||
		!slices.Equal(d.Voices[1].Languages, []string{"de-DE"}) || d.Voices[1].Description != "Bob, male" {
		t.Errorf("describe: %+v", d)
	}
	sentences := spoken(text, 2)
	var pcm []byte
	for _, s := range sentences {
		for _, v := range s {
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(v))
		}
	}
	sum := sha256.Sum256(pcm)
	for _, r := range []struct {
		name   string
		starts int // 0: not counted
		heard  heardBy
	}{{"whole", 0, got.Whole}, {"streamed", len(sentences), got.Streamed}} {
		h := r.heard
		switch {
		case h.Error != "":
			t.Errorf("%s: %s", r.name, h.Error)
		case !slices.Equal(h.Format, []int{16000, 2, 1}):
			t.Errorf("%s: format %v", r.name, h.Format)
		case h.Bytes != len(pcm) || h.SHA256 != hex.EncodeToString(sum[:]):
			t.Errorf("%s: %d bytes, not the %d the speaker made", r.name, h.Bytes, len(pcm))
		case r.starts > 0 && h.Starts != r.starts:
			t.Errorf("%s: %d audio streams, want %d", r.name, h.Starts, r.starts)
		}
	}
}
