package wyoming

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// benchSentence is the sentence whose first audio the benchmarks time;
// the stream goes on with benchNext.
const (
	benchSentence = "The kitchen lights are on now."
	benchNext     = " Next."
)

// BenchmarkFirstAudio times the first audio of one sentence of the
// built-in pipeline, on one server, three ways in turn in each iteration
// (so that the machine's load weighs on them alike): posted whole to
// /v1/audio/speech (the first byte of its streamed body), sent whole as a
// Wyoming synthesize (its first audio-chunk), and in a Wyoming stream,
// from the piece that completes the sentence as the talker sees it (its
// period and the next sentence's first character: the talker speaks a
// sentence once the next has begun) to the sentence's first audio-chunk.
// It reports the median of each and the stream's over the speech
// endpoint's.
func BenchmarkFirstAudio(b *testing.B) {
	cfg, err := pipeline.Load("builtin:tts")
	if err != nil {
		b.Fatal(err)
	}
	engines := shipped.Registry()
	for id := range cfg.Route.NumIDs() {
		if name, _ := cfg.StageSpec(id, 0); !engines.Has(name) {
			b.Skipf("needs engine %s", name)
		}
	}
	httpSrv := apitest.Start(b, cfg, orchestrator.Options{Registry: engines}, api.Options{})
	srv, err := New([]*orchestrator.Orchestrator{httpSrv.Orch}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	want := direct(b, httpSrv.Orch, benchSentence)

	body, _ := json.Marshal(map[string]any{"model": "tts", "input": benchSentence, "response_format": "pcm", "stream_format": "audio"})
	c := dial(b, ln.Addr().String())
	var speech, synth, stream []time.Duration
	for b.Loop() {
		speech = append(speech, firstSpeech(b, httpSrv.URL, body))
		synth = append(synth, firstSynthesize(c))
		stream = append(stream, firstStreamed(c, want))
	}
	ms := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(ms(speech), "speech-ms")
	b.ReportMetric(ms(synth), "synthesize-ms")
	b.ReportMetric(ms(stream), "stream-ms")
	b.ReportMetric(ms(stream)/ms(speech), "stream/speech")
}

// firstSpeech posts body to /v1/audio/speech and returns the time to the
// first byte of its audio.
func firstSpeech(b *testing.B, url string, body []byte) time.Duration {
	start := time.Now()
	resp, err := http.Post(url+"/v1/audio/speech", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, resp.Body)
	return d
}

// firstSynthesize sends the sentence as a synthesize and returns the time
// to its first audio-chunk.
func firstSynthesize(c *client) time.Duration {
	start := time.Now()
	c.send("synthesize", map[string]any{"text": benchSentence})
	c.expect("audio-start")
	c.expect("audio-chunk")
	d := time.Since(start)
	c.rest("audio-stop")
	return d
}

// firstStreamed streams the sentence and returns the time from the piece
// that completes it to its first audio-chunk, checking that the sentence
// sounds as it does whole (want).
func firstStreamed(c *client, want []int16) time.Duration {
	cut := len(benchSentence) - 1
	c.send("synthesize-start", nil)
	c.send("synthesize-chunk", map[string]any{"text": benchSentence[:cut]})
	start := time.Now()
	c.send("synthesize-chunk", map[string]any{"text": benchSentence[cut:] + benchNext[:2]})
	c.expect("audio-start")
	ev := c.expect("audio-chunk")
	d := time.Since(start)
	if got := append(pcmOf(ev.Payload), c.rest("audio-stop")...); !slices.Equal(got, want) {
		c.t.Fatalf("the stream's first sentence: %d samples, not the %d of the sentence whole", len(got), len(want))
	}
	c.send("synthesize-chunk", map[string]any{"text": benchNext[2:]})
	c.send("synthesize-stop", nil)
	c.readAudio("synthesize-stopped")
	return d
}

// rest reads the audio-chunks of an open audio stream up to until's
// event and returns their samples.
func (c *client) rest(until string) []int16 {
	var s []int16
	for {
		ev := c.next()
		switch ev.Type {
		case "audio-chunk":
			s = append(s, pcmOf(ev.Payload)...)
		case until:
			return s
		default:
			c.t.Fatalf("a %s event in an audio stream", ev.Type)
		}
	}
}

func pcmOf(b []byte) []int16 {
	s := make([]int16, len(b)/2)
	for i := range s {
		s[i] = int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
	}
	return s
}
