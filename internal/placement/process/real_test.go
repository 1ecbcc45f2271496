package process_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/pipeline"
)

func registerSpeech(r *engine.Registry) {
	flite.Register(r)
	sphinx.Register(r)
}

// TestRealVocoderInWorker runs the built-in tts pipeline with its vocoder
// (flite, through cgo) in a worker process: the audio and the word
// timestamps are those of the pipeline run in process.
func TestRealVocoderInWorker(t *testing.T) {
	yaml, err := pipeline.BuiltinYAML("tts")
	if err != nil {
		t.Fatal(err)
	}
	const inproc = "- {id: 1, replicas: 1, max_inflight: 64}"
	if !strings.Contains(string(yaml), inproc) {
		t.Fatalf("the built-in tts pipeline no longer deploys its vocoder as %q", inproc)
	}
	procYAML := strings.Replace(string(yaml), inproc, "- {id: 1, replicas: 1, max_inflight: 64, placement: process}", 1)

	req := orchestrator.Request{
		Prompt:     engine.Prompt{Text: "The vocoder runs in a process of its own. The talker runs here."},
		Modalities: []string{"audio", "timestamps"},
		Params:     []json.RawMessage{json.RawMessage(`{"speed":1.1}`), nil, nil},
	}
	want := orchtest.CollectSpeech(t, start(t, writeConfig(t, string(yaml)), registerSpeech).o, req)
	procs := start(t, writeConfig(t, procYAML), registerSpeech)
	got := orchtest.CollectSpeech(t, procs.o, req)
	if n := len(procs.workers); n != 1 {
		t.Fatalf("%d workers started, want 1 for the vocoder", n)
	}
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
