package worker_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/flite"
	"github.com/omnistage/omnistage/internal/engines/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

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
	s, err := o.Submit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	outs, err := s.Collect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var sp speech
	for _, out := range outs {
		if a, err := engine.JoinAudio(out.Chunks); err != nil {
			t.Fatal(err)
		} else if a != nil {
			sp.rate, sp.samples = a.SampleRate, a.Samples
		}
		sp.words = append(sp.words, engine.JoinWords(out.Chunks)...)
	}
	return sp
}

// TestRealVocoderInWorker runs the built-in tts pipeline with its vocoder
// (flite, through cgo) in a worker process: the audio and the word
// timestamps are those of the pipeline run in process.
func TestRealVocoderInWorker(t *testing.T) {
	yaml, err := pipeline.BuiltinYAML("tts")
	if err != nil {
		t.Fatal(err)
	}
	const inproc = "- {id: 1, replicas: 1, max_inflight: 2}"
	if !strings.Contains(string(yaml), inproc) {
		t.Fatalf("the built-in tts pipeline no longer deploys its vocoder as %q", inproc)
	}
	procYAML := strings.Replace(string(yaml), inproc, "- {id: 1, replicas: 1, max_inflight: 2, placement: process}", 1)

	req := orchestrator.Request{
		Prompt:     engine.Prompt{Text: "The vocoder runs in a process of its own. The talker runs here."},
		Modalities: []string{"audio", "timestamps"},
		Params:     []json.RawMessage{json.RawMessage(`{"speed":1.1}`), nil, nil},
	}
	want := collectSpeech(t, start(t, writeConfig(t, string(yaml)), registerSpeech).o, req)
	procs := start(t, writeConfig(t, procYAML), registerSpeech)
	got := collectSpeech(t, procs.o, req)
	if n := len(procs.workers); n != 1 {
		t.Fatalf("%d workers started, want 1 for the vocoder", n)
	}
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
