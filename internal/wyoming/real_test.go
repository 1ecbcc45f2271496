package wyoming

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// realText is three sentences for the real engines.
const realText = "Hello from Home Assistant. The kitchen lights are on, and it is 21 degrees. Goodbye!"

// realFixture serves the built-in tts pipeline on the shipped engines
// (Flite's talker and vocoder, PocketSphinx's aligner), or skips the test
// when the build lacks one.
func realFixture(t *testing.T) (*fixture, *pipeline.Config) {
	t.Helper()
	cfg, err := pipeline.Load("builtin:tts")
	if err != nil {
		t.Fatal(err)
	}
	engines := shipped.Registry()
	for id := range cfg.Route.NumIDs() {
		if name, _ := cfg.StageSpec(id, 0); !engines.Has(name) {
			t.Skipf("the built-in tts pipeline needs engine %s, which this build lacks", name)
		}
	}
	return start(t, engines, Options{}, cfg), cfg
}

// TestRealEngines: over the built-in pipeline, the info lists Flite's
// voices; a synthesize relays the very samples the pipeline makes of the
// text in that voice; a stream, however its pieces cut the text, speaks
// its first sentence before the rest is sent and gives the same samples,
// a sentence per audio stream; and PocketSphinx finds in the stream's
// audio the words it finds in the pipeline's own.
func TestRealEngines(t *testing.T) {
	f, cfg := realFixture(t)
	c := dial(t, f.addr)
	c.send("describe", nil)
	var names []string
	for _, v := range c.expect("info").Data["tts"].([]any)[0].(map[string]any)["voices"].([]any) {
		names = append(names, v.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"slt", "rms", "awb"}) {
		t.Errorf("voices %v", names)
	}

	params, err := talker.Params{Voice: "rms"}.SamplingParams(cfg.Route.NumIDs())
	if err != nil {
		t.Fatal(err)
	}
	want := orchtest.CollectSpeech(t, f.orchs[0], orchestrator.Request{Prompt: engine.Prompt{Text: realText},
		Params: params, Modalities: []string{"audio", "timestamps"}})
	if len(want.Words) < 10 {
		t.Fatalf("the pipeline's timestamps: %v", want.Words)
	}
	c.send("synthesize", map[string]any{"text": realText, "voice": map[string]any{"name": "rms"}})
	whole := c.readAudio("audio-stop")
	if whole.rate != want.Rate || !slices.Equal(whole.joined(), want.Samples) {
		t.Fatalf("synthesize: %d samples at %d Hz; the pipeline makes %d at %d", len(whole.joined()), whole.rate, len(want.Samples), want.Rate)
	}

	for _, cut := range []int{1, 5, 13} {
		c.send("synthesize-start", map[string]any{"voice": map[string]any{"name": "rms"}})
		first := strings.Index(realText, ".") + 3 // the first sentence and the start of the next
		for i := 0; i < first; i += cut {
			c.send("synthesize-chunk", map[string]any{"text": realText[i:min(i+cut, first)]})
		}
		a := c.readAudio("audio-stop")
		for i := first; i < len(realText); i += cut {
			c.send("synthesize-chunk", map[string]any{"text": realText[i:min(i+cut, len(realText))]})
		}
		c.send("synthesize-stop", nil)
		rest := c.readAudio("synthesize-stopped")
		a.streams = append(a.streams, rest.streams...)
		if len(a.streams) != 3 || !slices.Equal(a.joined(), want.Samples) {
			t.Fatalf("a stream cut every %d bytes: %d sentences, %d samples; want 3 and the pipeline's %d", cut, len(a.streams), len(a.joined()), len(want.Samples))
		}
		if cut == 5 {
			if got := align(t, cfg, a); !reflect.DeepEqual(got, want.Words) {
				t.Errorf("PocketSphinx on the stream's audio:\n%v\non the pipeline's:\n%v", got, want.Words)
			}
		}
	}
}

// align runs the pipeline's aligner on what a client heard, a sentence
// per audio stream, with realText as the transcript.
func align(t *testing.T, cfg *pipeline.Config, a heard) []engine.Word {
	t.Helper()
	id, _ := cfg.Route.Aligner()
	_, spec := cfg.StageSpec(id, 0)
	al, err := sphinx.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var in []engine.Chunk
	for _, s := range a.streams {
		in = append(in, engine.Chunk{Audio: &engine.Audio{SampleRate: a.rate, Samples: s}},
			engine.Chunk{Audio: &engine.Audio{SampleRate: a.rate, EndOfSentence: true}})
	}
	out := &engine.SliceSink{}
	if err := al.Process(ctx, &engine.Job{Prompt: engine.Prompt{Text: realText}, In: engine.NewSliceSource(in...), Out: out}); err != nil {
		t.Fatal(err)
	}
	return engine.JoinWords(out.Chunks)
}

// TestRealSentenceEnds: a stream's sentence is spoken before
// synthesize-stop once its end is certain ("?"), or once the text has
// ended in a full stop for the quiet time; either is the sentence's
// audio posted whole.
func TestRealSentenceEnds(t *testing.T) {
	cfg, err := pipeline.Load("builtin:tts")
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, shipped.Registry(), Options{SentenceQuiet: 50 * time.Millisecond}, cfg)
	c := dial(t, f.addr)
	for _, text := range []string{"Is it raining? ", "Hello from Home Assistant."} {
		want := orchtest.CollectSpeech(t, f.orchs[0], orchestrator.Request{Prompt: engine.Prompt{Text: strings.TrimSpace(text)}})
		c.send("synthesize-start", nil)
		c.send("synthesize-chunk", map[string]any{"text": text})
		a := c.readAudio("audio-stop")
		if !slices.Equal(a.joined(), want.Samples) {
			t.Errorf("%q: %d samples before synthesize-stop; posted whole, %d", text, len(a.joined()), len(want.Samples))
		}
		c.send("synthesize-stop", nil)
		c.readAudio("synthesize-stopped")
	}
}
