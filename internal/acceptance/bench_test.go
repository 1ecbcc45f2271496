package acceptance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/enhance"
	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/engine/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// benchParagraph is about 10 s of slt speech (the text the sphinx
// aligner's own benchmark uses); the talker makes three sentences of it,
// the first about a second long.
const benchParagraph = "Please call Stella. Ask her to bring these things with her from the store: " +
	"six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob."

// oneSentence makes text one sentence for the talker: every mark that
// may end one (flite breaks at colons and semicolons too) but the last
// becomes a comma.
func oneSentence(text string) string {
	body, last := text[:len(text)-1], text[len(text)-1:]
	return strings.NewReplacer(".", ",", "!", ",", "?", ",", ":", ",", ";", ",").Replace(body) + last
}

// reportRTF reports the real-time factor: seconds of computing per
// second of speech.
func reportRTF(b *testing.B, speech float64) {
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/speech, "rtf")
	b.ReportMetric(speech, "speech-s")
}

func audioOf(chunks []engine.Chunk) *engine.Audio {
	a := &engine.Audio{}
	for _, c := range chunks {
		if c.Audio != nil {
			a.SampleRate = c.Audio.SampleRate
			a.Samples = append(a.Samples, c.Audio.Samples...)
		}
	}
	return a
}

// BenchmarkStage measures each engine of the tts-24k pipeline alone on
// benchParagraph, called directly with a slice for input and output: the
// talker on the text, the vocoder on the talker's frames, enhance (to
// 24 kHz, normalized) and the aligner on the vocoder's audio.
func BenchmarkStage(b *testing.B) {
	ctx := context.Background()
	talker := newTalker(b, "slt")
	vocoder := newEngine(b, flite.VocoderName, engine.KindFrames, engine.KindAudio, nil)
	enhancer := newEngine(b, enhance.Name, engine.KindAudio, engine.KindAudio, nil)
	aligner := newEngine(b, sphinx.Name, engine.KindAudio, engine.KindTimestamps, nil)
	frames, err := process(ctx, talker, "", textChunk(benchParagraph))
	if err != nil {
		b.Fatal(err)
	}
	audio, err := process(ctx, vocoder, "", frames...)
	if err != nil {
		b.Fatal(err)
	}
	speech := seconds(audioOf(audio))
	stages := []struct {
		name   string
		e      engine.Engine
		prompt string
		in     []engine.Chunk
	}{
		{"talker", talker, "", []engine.Chunk{textChunk(benchParagraph)}},
		{"vocoder", vocoder, "", frames},
		{"enhance", enhancer, "", audio},
		{"aligner", aligner, benchParagraph, audio},
	}
	for _, s := range stages {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := process(ctx, s.e, s.prompt, s.in...); err != nil {
					b.Fatal(err)
				}
			}
			reportRTF(b, speech)
		})
	}
}

// startPipeline starts a built-in pipeline as `omnistage say` does.
func startPipeline(b *testing.B, name string) *orchestrator.Orchestrator {
	b.Helper()
	cfg, err := pipeline.Builtin(name)
	if err != nil {
		b.Fatal(err)
	}
	return startConfig(b, cfg)
}

// startConfig starts the pipeline of cfg as `omnistage say` does.
func startConfig(b *testing.B, cfg *pipeline.Config) *orchestrator.Orchestrator {
	b.Helper()
	o, err := orchestrator.New(cfg, orchestrator.Options{Registry: shipped.Registry()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			b.Error(err)
		}
	})
	if err := o.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return o
}

// request runs text through o and returns the seconds of speech and the
// time from submission to the first audio chunk.
func request(b *testing.B, o *orchestrator.Orchestrator, text string, modalities ...string) (speech float64, firstAudio time.Duration) {
	ctx := context.Background()
	start := time.Now()
	s, err := o.Submit(ctx, orchestrator.Request{Prompt: engine.Prompt{Text: text}, Modalities: modalities})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var samples, rate, words int
	for {
		out, err := s.Recv(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if a := out.Chunk.Audio; a != nil {
			if firstAudio == 0 {
				firstAudio = time.Since(start)
			}
			samples += len(a.Samples)
			rate = a.SampleRate
		}
		if w := out.Chunk.Words; w != nil {
			words += len(w.Words)
		}
	}
	if samples == 0 {
		b.Fatal("no audio")
	}
	if len(modalities) > 1 && words == 0 {
		b.Fatal("no timestamps")
	}
	return float64(samples) / float64(rate), firstAudio
}

// BenchmarkPipeline measures the built-in tts pipeline through the
// orchestrator on benchParagraph, one request at a time: audio only
// (talker and vocoder streaming a sentence at a time) and audio with
// timestamps (the aligner after them, on the whole audio).
func BenchmarkPipeline(b *testing.B) {
	o := startPipeline(b, "tts")
	for _, m := range []struct {
		name       string
		modalities []string
	}{
		{"audio", []string{"audio"}},
		{"audio+timestamps", []string{"audio", "timestamps"}},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			var speech float64
			for b.Loop() {
				speech, _ = request(b, o, benchParagraph, m.modalities...)
			}
			reportRTF(b, speech)
		})
	}
}

// BenchmarkFirstAudio measures the time from submitting benchParagraph
// to the first audio chunk through the orchestrator, as the talker
// streams it a sentence at a time ("sentences") and when the same words
// are one sentence ("one-sentence": sentence ends made commas), which
// the talker and the vocoder must finish whole before any audio leaves.
// Compare the two "ttfa-ms" values of one run.
func BenchmarkFirstAudio(b *testing.B) {
	o := startPipeline(b, "tts")
	whole := oneSentence(benchParagraph)
	talker := newTalker(b, "slt")
	for text, want := range map[string]string{benchParagraph: "several", whole: "one"} {
		chunks, err := process(context.Background(), talker, "", textChunk(text))
		if err != nil {
			b.Fatal(err)
		}
		if (len(chunks) == 1) != (want == "one") {
			b.Fatalf("the talker makes %d sentences of %q, want %s", len(chunks), text, want)
		}
	}
	for _, m := range []struct{ name, text string }{
		{"sentences", benchParagraph},
		{"one-sentence", whole},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			var total time.Duration
			for b.Loop() {
				_, first := request(b, o, m.text, "audio")
				total += first
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ttfa-ms")
		})
	}
}

// BenchmarkPlacement measures what users of POST /v1/audio/speech with
// stream_format audio wait for, on the committee paragraph (about 19 s of
// speech), with the vocoder in process ("inproc", the built-in tts), in a
// worker process ("process"), and with the talker and the vocoder on two
// headless stage servers ("remote"): the time to the first audio byte
// (PLACEMENT-ttfa-ms) and to the last (PLACEMENT-total-ms). Each server is
// the omnistage binary, on loopback. Every front end answers one request
// before any is measured (a server's first request is slower: its
// connections, pages of its binary and of the voice not touched yet), and
// each iteration sends one request to each, in a new random order, so
// that the placements share whatever else the machine runs meanwhile.
// Compare the metrics of one run.
func BenchmarkPlacement(b *testing.B) {
	talker, vocoder := serve(b, "--stage", "0"), serve(b, "--stage", "1")
	placements := []struct{ name, deploy, url string }{
		{name: "inproc"},
		{name: "process", deploy: "    - {id: 1, placement: process}\n"},
		{name: "remote", deploy: fmt.Sprintf("    - {id: 0, placement: remote, endpoints: [%q]}\n    - {id: 1, placement: remote, endpoints: [%q]}\n", talker.url, vocoder.url)},
	}
	body := fmt.Sprintf(`{"model": "tts", "input": %q, "response_format": "pcm", "stream_format": "audio"}`, committee)
	for i := range placements {
		p := &placements[i]
		p.url = serve(b, "--config", writeFile(b, p.name+".yaml", ttsWith(b, p.deploy))).url
		if _, _, err := speechTimes(p.url, body); err != nil {
			b.Fatalf("%s: the first request: %v", p.name, err)
		}
	}
	ttfa := make([]time.Duration, len(placements))
	total := make([]time.Duration, len(placements))
	order := []int{0, 1, 2}
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			first, all, err := speechTimes(placements[k].url, body)
			if err != nil {
				b.Fatalf("%s: %v", placements[k].name, err)
			}
			ttfa[k] += first
			total[k] += all
		}
	}
	for k, p := range placements {
		b.ReportMetric(float64(ttfa[k].Microseconds())/1000/float64(b.N), p.name+"-ttfa-ms")
		b.ReportMetric(float64(total[k].Microseconds())/1000/float64(b.N), p.name+"-total-ms")
	}
}

// speechTimes posts a streamed speech request of body to the server at
// url, reads its answer, and returns the times to its first byte of audio
// and to its end.
func speechTimes(url, body string) (first, total time.Duration, err error) {
	start := time.Now()
	resp, err := http.Post(url+"/v1/audio/speech", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	n, err := resp.Body.Read(buf)
	if n == 0 || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d, first read %d bytes: %v", resp.StatusCode, n, err)
	}
	first = time.Since(start)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, err
	}
	return first, time.Since(start), nil
}

// BenchmarkTimestamps measures, side by side on one SSE speech stream of
// the committee paragraph with word timestamps, the time to the first
// audio delta and to the first timestamps event (the first sentence's,
// aligned as soon as its audio is complete).
func BenchmarkTimestamps(b *testing.B) {
	front := serve(b)
	body := fmt.Sprintf(`{"model": "tts", "input": %q, "response_format": "pcm", "stream_format": "sse"}`, committee)
	var ttfa, ttft, total time.Duration
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, front.url+"/v1/audio/speech", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Word-Timestamps", "true")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %v: %v", resp, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		var gotAudio, gotStamps bool
		for sc.Scan() {
			line := sc.Text()
			switch {
			case !gotAudio && strings.Contains(line, `"speech.audio.delta"`):
				gotAudio = true
				ttfa += time.Since(start)
			case !gotStamps && strings.Contains(line, `"speech.word_timestamps"`):
				gotStamps = true
				ttft += time.Since(start)
			}
		}
		resp.Body.Close()
		if !gotAudio || !gotStamps {
			b.Fatalf("audio %v, timestamps %v", gotAudio, gotStamps)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(ttfa.Microseconds())/1000/float64(b.N), "ttfa-ms")
	b.ReportMetric(float64(ttft.Microseconds())/1000/float64(b.N), "ttft-ms")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "total-ms")
}
