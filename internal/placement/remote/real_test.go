package remote_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

func registerSpeech(r *engine.Registry) {
	flite.Register(r)
	sphinx.Register(r)
}

// TestRemoteRealEngines runs the talker (frames go back in a payload) and
// the aligner (timestamps come back in a finished answer) on headless
// stage servers with the real engines, the vocoder in process, and checks
// that the request gives what it gives with every stage in process.
func TestRemoteRealEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts stage servers with the real engines")
	}
	const key = "remote-real-engines-key-0123"
	inproc := testkit.BuiltinWith(t, "tts", "    - {id: 0, options: {voice: slt}}\n")
	talker, _ := startStageServerWith(t, inproc, 0, key, registerSpeech)
	aligner, _ := startStageServerWith(t, inproc, 2, key, registerSpeech)
	mixed := testkit.BuiltinWith(t, "tts", fmt.Sprintf(`    - {id: 0, placement: remote, endpoints: [%q], options: {voice: slt}}
    - {id: 2, placement: remote, endpoints: [%q]}
`, talker, aligner))

	req := orchestrator.Request{
		Prompt:     engine.Prompt{Text: "The talker runs on another server. The vocoder runs here."},
		Modalities: []string{"audio", "timestamps"},
		Params:     []json.RawMessage{json.RawMessage(`{"speed":1.1}`), nil, nil},
	}
	want := orchtest.CollectSpeech(t, startLocalWith(t, inproc, nil, registerSpeech), req)
	got := orchtest.CollectSpeech(t, startLocalWith(t, mixed, payload.NewCodec([]byte(key)), registerSpeech), req)
	if len(want.Samples) == 0 || len(want.Words) == 0 {
		t.Fatalf("in-process run gave %d samples, %d words", len(want.Samples), len(want.Words))
	}
	if got.Rate != want.Rate || !reflect.DeepEqual(got.Samples, want.Samples) {
		t.Errorf("audio: %d samples at %d Hz, want %d at %d Hz", len(got.Samples), got.Rate, len(want.Samples), want.Rate)
	}
	if !reflect.DeepEqual(got.Words, want.Words) {
		t.Errorf("words %v, want %v", got.Words, want.Words)
	}
}
