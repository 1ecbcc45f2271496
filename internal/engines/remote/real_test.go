package remote_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/flite"
	"github.com/omnistage/omnistage/internal/engines/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// ttsPipeline is the built-in tts pipeline with the deploy stages given.
const ttsPipeline = `
pipeline:
  name: tts
  input: text
  stages:
    - {id: 0, name: talker,  engine: flite-talker,  input: text,   output: frames}
    - {id: 1, name: vocoder, engine: flite-vocoder, input: frames, output: audio, final_output: true}
  aligner: {engine: sphinx-aligner}
deploy:
  stages:
%s
`

func registerSpeech(r *engine.Registry) {
	flite.Register(r)
	sphinx.Register(r)
}

// speech is a request's audio samples and words.
type speech struct {
	rate    int
	samples []int16
	words   []engine.Word
}

func collectSpeech(t *testing.T, o *orchestrator.Orchestrator, req orchestrator.Request) speech {
	t.Helper()
	outs, err := outputs(o, req)
	if err != nil {
		t.Fatal(err)
	}
	var s speech
	for _, out := range outs {
		if a := out.Chunk.Audio; a != nil {
			s.rate = a.SampleRate
			s.samples = append(s.samples, a.Samples...)
		}
		if w := out.Chunk.Words; w != nil {
			s.words = append(s.words, w.Words...)
		}
	}
	return s
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
	inproc := fmt.Sprintf(ttsPipeline, "    - {id: 0, options: {voice: slt}}")
	talker, _ := startStageServerWith(t, inproc, 0, key, registerSpeech)
	aligner, _ := startStageServerWith(t, inproc, 2, key, registerSpeech)
	mixed := fmt.Sprintf(ttsPipeline, fmt.Sprintf(`    - {id: 0, placement: remote, endpoints: [%q], options: {voice: slt}}
    - {id: 2, placement: remote, endpoints: [%q]}`, talker, aligner))

	req := orchestrator.Request{
		Prompt:     engine.Prompt{Text: "The talker runs on another server. The vocoder runs here."},
		Modalities: []string{"audio", "timestamps"},
		Params:     []json.RawMessage{json.RawMessage(`{"speed":1.1}`), nil, nil},
	}
	want := collectSpeech(t, startLocalWith(t, inproc, nil, registerSpeech), req)
	got := collectSpeech(t, startLocalWith(t, mixed, payload.NewCodec([]byte(key)), registerSpeech), req)
	if len(want.samples) == 0 || len(want.words) == 0 {
		t.Fatalf("in-process run gave %d samples, %d words", len(want.samples), len(want.words))
	}
	if got.rate != want.rate || !reflect.DeepEqual(got.samples, want.samples) {
		t.Errorf("audio: %d samples at %d Hz, want %d at %d Hz", len(got.samples), got.rate, len(want.samples), want.rate)
	}
	if !reflect.DeepEqual(got.words, want.words) {
		t.Errorf("words %v, want %v", got.words, want.words)
	}
}
