package api

// WS /v1/audio/speech/stream with the built-in pipeline's stages on stage
// servers (placement remote): the talker takes the text as it streams over
// a streamed /v1/run, and each sentence's text crosses both hops.

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/testkit"
)

// remoteFixture serves the built-in tts pipeline with its talker and its
// vocoder each on a headless stage server of its own (real Flite), signed
// with one key, and the aligner in process.
func remoteFixture(t testing.TB) *fixture {
	t.Helper()
	key := []byte("ws-remote-stages-key-0123456789")
	whole, err := pipeline.Load("builtin:tts")
	if err != nil {
		t.Fatal(err)
	}
	var deploy strings.Builder
	for id := range 2 {
		fmt.Fprintf(&deploy, "    - {id: %d, placement: remote, endpoints: [%q]}\n", id, stageServer(t, whole, id, key, shipped.Registry()))
	}
	cfg := testkit.Parse(t, testkit.BuiltinWith(t, "tts", deploy.String()))
	return realFixtureWith(t, cfg, map[pipeline.Placement]orchestrator.Placement{
		pipeline.PlacementRemote: &remote.Placement{Pipeline: cfg, Codec: payload.NewCodec(key)},
	})
}

// TestSpeechStreamRemoteStages streams liveText word by word to a server
// whose talker and vocoder run on stage servers: the first sentence's
// audio begins before the rest of the text is sent, each audio.start
// names its sentence as sent (the spans crossed both hops), and the audio
// is byte for byte that of the text posted whole, to the same server and
// to one that runs every stage in process.
func TestSpeechStreamRemoteStages(t *testing.T) {
	f := remoteFixture(t)
	whole := wholePCM(t, f, liveText)
	if here := wholePCM(t, realFixture(t, "builtin:tts", ""), liveText); !bytes.Equal(whole, here) {
		t.Fatalf("the text posted whole: %d bytes through the stage servers, %d in process; they differ", len(whole), len(here))
	}
	c := dialWS(t, f.url, nil)
	c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true)
	first, rest, _ := strings.Cut(liveText, " It")
	feedWords(c, first+" It")
	read := c.until(evAudioStart) // before the rest is sent: the talker had the text as it came
	feedWords(c, rest)
	c.event(evDone)
	h := c.utterance(read...)
	if h.end.typ != evSessionDone {
		t.Fatalf("the utterance ended with %s", h.end.raw)
	}
	var texts []string
	for _, s := range h.starts {
		texts = append(texts, s.SentenceText)
	}
	if !slices.Equal(texts, liveSentencesWant) {
		t.Errorf("sentences %q, want %q", texts, liveSentencesWant)
	}
	if got := h.audio(); !bytes.Equal(got, whole) {
		t.Errorf("streamed audio: %d bytes; the text posted whole: %d bytes; they differ", len(got), len(whole))
	}
}

// stageServer serves stage id of cfg headless (omnistage serve --stage
// id), on the engines of reg, signing with key, and returns its URL.
func stageServer(t testing.TB, cfg *pipeline.Config, id int, key []byte, reg *engine.Registry) string {
	t.Helper()
	o, err := orchestrator.New(cfg, orchestrator.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Shutdown(context.Background()); err != nil {
			t.Errorf("stage %d: shutdown: %v", id, err)
		}
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := New([]*orchestrator.Orchestrator{o}, Options{Stage: &id, Codec: payload.NewCodec(key), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestSpeechStreamRemoteTimestamps runs the fake live pipeline with its
// talker and vocoder on stage servers and its aligner in process: the
// aligner finds each sentence by the span its audio carries back across
// the hops, so an utterance's audio.start texts, word timestamps and audio
// are those of the same utterance with every stage in process.
func TestSpeechStreamRemoteTimestamps(t *testing.T) {
	key := []byte("ws-remote-fakes-key-0123456789")
	whole := testkit.Parse(t, liveYAML)
	reg := &engine.Registry{}
	liveEngines(nil)(reg)
	deploy := "  stages:\n"
	for id := range 2 {
		deploy += fmt.Sprintf("    - {id: %d, placement: remote, endpoints: [%q]}\n", id, stageServer(t, whole, id, key, reg))
	}
	cfg := testkit.Parse(t, liveYAML+deploy)
	here := newFixture(t, setup{yaml: liveYAML, engines: liveEngines(nil)})
	there := newFixture(t, setup{yaml: liveYAML + deploy, engines: liveEngines(nil), placements: map[pipeline.Placement]orchestrator.Placement{
		pipeline.PlacementRemote: &remote.Placement{Pipeline: cfg, Codec: payload.NewCodec(key)},
	}})
	var got [2]*heardUtterance
	for i, f := range []*fixture{here, there} {
		c := dialWS(t, f.url, nil)
		c.event(evConfig, "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
		for _, piece := range []string{"Héllo", " 😀 ", "there.", "  H", "ow are", " you? ", "Fine"} {
			c.event(evText, "text", piece)
		}
		c.event(evDone)
		got[i] = c.utterance()
	}
	sentences := func(h *heardUtterance) (texts []string) {
		for _, s := range h.starts {
			texts = append(texts, s.SentenceText)
		}
		return texts
	}
	if a, b := sentences(got[0]), sentences(got[1]); !slices.Equal(a, b) || len(a) != 3 {
		t.Errorf("sentences through the stage servers %q, in process %q", b, a)
	}
	if a, b := got[0].allWords(), got[1].allWords(); !reflect.DeepEqual(a, b) || len(a) == 0 {
		t.Errorf("word timestamps through the stage servers\n%+v\nin process\n%+v", b, a)
	}
	if !bytes.Equal(got[0].audio(), got[1].audio()) {
		t.Errorf("audio through the stage servers: %d bytes, in process %d; they differ", len(got[1].audio()), len(got[0].audio()))
	}
}
