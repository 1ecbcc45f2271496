package api

// The ElevenLabs API, driven by LiveKit's ElevenLabs plugin itself.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// elText is what the plugin streams: sentences the plugin's tokenizer and
// Flite cut alike.
const elText = "Hello there, my friend. This is omnistage speaking to you now. How are you today?"

// elPlugin is the result of one run of test/elevenlabs-node/check.mjs.
type elPlugin struct {
	Audio []byte `json:"audio"`
	Words []struct {
		Text  string  `json:"text"`
		Start float64 `json:"start"`
		End   float64 `json:"end"`
	} `json:"words"`
	LastTextMs   float64 `json:"lastTextMs"`
	FirstAudioMs float64 `json:"firstAudioMs"`
}

// elPluginDir returns test/elevenlabs-node, or skips the test when the
// plugin is not installed.
func elPluginDir(t testing.TB) string {
	t.Helper()
	dir, _ := filepath.Abs("../../test/elevenlabs-node")
	if _, err := exec.LookPath("node"); err != nil {
		testdeps.Missing(t, "no node (scripts/install-deps.sh installs nodejs)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@livekit", "agents-plugin-elevenlabs")); err != nil {
		testdeps.Missing(t, "the ElevenLabs plugin is not installed: run scripts/install-deps.sh --test (npm ci in test/elevenlabs-node)")
	}
	return dir
}

// runPlugin runs check.mjs against the server at base.
func runPlugin(t testing.TB, dir, mode, base, voice, encoding, text string, delayMs int, key string) elPlugin {
	t.Helper()
	cmd := exec.Command("node", "check.mjs", mode, base, voice, encoding, fmt.Sprint(delayMs), text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ELEVEN_API_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.mjs %s %s: %v\n%s", mode, encoding, err, stderr.String())
	}
	// The plugin's logger writes its warnings there too: the result is the
	// last line.
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var out elPlugin
	if err := json.Unmarshal(lines[len(lines)-1], &out); err != nil {
		t.Fatalf("node check.mjs %s %s: %v\n%s\n%s", mode, encoding, err, stdout.String(), stderr.String())
	}
	return out
}

// elExpected is the audio of samples (at rate Hz) in format, resampled
// and encoded whole.
func elExpected(t testing.TB, format string, samples []int16, rate int) []byte {
	t.Helper()
	f, err := parseELFormat(format)
	if err != nil {
		t.Fatal(err)
	}
	s := audio.Resample(samples, rate, f.rate)
	switch f.kind {
	case encode.MP3:
		b, err := encode.Whole(encode.MP3, f.rate, s, encode.Options{Bitrate: f.bitrate, Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	case "ulaw":
		out := make([]byte, len(s))
		for i, v := range s {
			out[i] = ulaw(v)
		}
		return out
	}
	return audio.AppendPCMBytes(nil, s)
}

// TestElevenLabsPlugin drives the server with LiveKit's ElevenLabs plugin
// (test/elevenlabs-node, @livekit/agents-plugin-elevenlabs 1.9.0),
// unchanged but for its base URL: it streams a text a word at a time over
// multi-stream-input, and asks for it whole (POST .../stream), in each
// output format. The audio is byte for byte the text posted whole,
// resampled and encoded as asked; the plugin's timed transcript, made from
// the server's character alignment, has the text's words at the times
// the aligner gives the text posted whole.
func TestElevenLabsPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node with LiveKit's agents, seconds a run")
	}
	dir := elPluginDir(t)
	f := realFixture(t, "builtin:tts", "")
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
		map[string]any{"model": "tts", "input": elText, "response_format": "pcm"}, "X-Word-Timestamps", "true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/audio/speech: %d %s", resp.StatusCode, body)
	}
	var whole []engine.Word
	if err := json.Unmarshal([]byte(resp.Header.Get("X-Word-Timestamps")), &whole); err != nil {
		t.Fatal(err)
	}
	samples := make([]int16, len(body)/2)
	_, _ = binary.Decode(body, binary.LittleEndian, samples)
	for _, tc := range []struct{ mode, format string }{
		{"stream", "pcm_22050"}, {"stream", "pcm_16000"}, {"stream", "pcm_44100"},
		{"stream", "ulaw_8000"}, {"stream", "mp3_22050_32"}, {"synthesize", "mp3_44100_128"},
	} {
		t.Run(tc.mode+"/"+tc.format, func(t *testing.T) {
			got := runPlugin(t, dir, tc.mode, f.url, "Vivian", tc.format, elText, 5, "")
			want := elExpected(t, tc.format, samples, 16000)
			// The plugin takes every format for 16-bit PCM in frames of 100
			// ms, and drops a last frame that is not whole: mp3's and μ-law's
			// bytes may lose their tail there.
			format, _ := parseELFormat(tc.format)
			if !bytes.HasPrefix(want, got.Audio) || len(want)-len(got.Audio) >= format.rate/10*2 || format.kind == encode.PCM && len(want) != len(got.Audio) {
				t.Errorf("%d bytes of audio, the text posted whole in %s is %d", len(got.Audio), tc.format, len(want))
			}
			if tc.mode == "stream" && !strings.HasPrefix(tc.format, "mp3") {
				checkELWords(t, got, whole)
			}
		})
	}
}

// checkELWords checks the plugin's timed transcript against the words of
// the text posted whole: the same words, at the same times from the first
// word's start (the plugin starts its transcript there), to the ms.
func checkELWords(t *testing.T, got elPlugin, whole []engine.Word) {
	t.Helper()
	if len(got.Words) != len(whole) {
		t.Fatalf("%d timed words, the text has %d: %+v", len(got.Words), len(whole), got.Words)
	}
	first := whole[0].StartMs
	for i, w := range got.Words {
		ms := int(w.Start*1000 + 0.5)
		if strings.TrimRight(w.Text, " .,?!") != whole[i].Word || abs(ms-(whole[i].StartMs-first)) > 1 {
			t.Errorf("word %d: %q at %d ms; the text posted whole has %q at %d ms", i, w.Text, ms, whole[i].Word, whole[i].StartMs-first)
		}
	}
}

// elBenchText is what BenchmarkElevenLabsFirstAudio speaks: its first
// sentence's end is certain, so neither side waits for more.
const elBenchText = "Hello there, my friend! This is omnistage speaking to you now. How are you today?"

// BenchmarkElevenLabsFirstAudio measures, interleaved in each iteration,
// the first audio of elBenchText sent a sentence at a time, 100 ms apart,
// from the start of the stream (its connection included): over
// ElevenLabs' multi-stream-input by a Go client (each sentence a text
// with flush, pcm_16000: its first audio message), over omnistage's own
// WebSocket by a Go client (each sentence an input.text, pcm, with word
// timestamps as the ElevenLabs side has its alignment: its first audio
// message), and through LiveKit's ElevenLabs plugin itself (node,
// each sentence pushed and flushed, as an agent flushes its LLM's
// segments: its first audio frame, which the plugin hands on only once
// 100 ms of audio, and the next frame, have come). It reports the medians
// (ms) and the ratios to omnistage's WebSocket; the goal is <= 1.1 for
// the ElevenLabs protocol. Run it with
//
//	go test -run '^$' -bench ElevenLabsFirstAudio -benchtime 5x -count 6 ./internal/api/
func BenchmarkElevenLabsFirstAudio(b *testing.B) {
	dir := elPluginDir(b)
	f := realFixture(b, "builtin:tts", "")
	var sentences []string
	for _, s := range strings.SplitAfter(elBenchText, " ") {
		if n := len(sentences); n > 0 && !strings.ContainsAny(sentences[n-1], ".!?") {
			sentences[n-1] += s
		} else {
			sentences = append(sentences, s)
		}
	}
	// firstAudio runs send and times the first audio message that read
	// returns, from start.
	firstAudio := func(start time.Time, read func() (audio bool, err error), send func(string)) float64 {
		first := make(chan time.Duration, 1)
		go func() {
			for {
				audio, err := read()
				if err != nil || audio {
					first <- time.Since(start)
					return
				}
			}
		}()
		for _, s := range sentences {
			send(s)
			time.Sleep(100 * time.Millisecond)
		}
		return ms(<-first)
	}
	var pluginT, elT, wsT []float64
	for b.Loop() {
		pluginT = append(pluginT, runPlugin(b, dir, "sentences", f.url, "slt", "pcm_16000", elBenchText, 100, "").FirstAudioMs)

		start := time.Now()
		el, _, err := dialEL(b, f.url, "/v1/text-to-speech/slt/multi-stream-input?output_format=pcm_16000", nil)
		if err != nil {
			b.Fatal(err)
		}
		elSend(b, el, map[string]any{"text": " ", "context_id": "c"})
		elT = append(elT, firstAudio(start, func() (bool, error) {
			m, err := elRecv(b, el)
			return len(m.Audio) > 0, err
		}, func(s string) { elSend(b, el, map[string]any{"text": s, "context_id": "c", "flush": true}) }))
		_ = el.CloseNow()

		start = time.Now()
		c := dialWS(b, f.url, nil)
		c.event(evConfig, "model", "tts", "response_format", "pcm", "stream_audio", true, "word_timestamps", true)
		wsT = append(wsT, firstAudio(start, func() (bool, error) {
			m, err := c.tryRecv()
			return m.typ == "", err
		}, func(s string) { c.event(evText, "text", s) }))
		_ = c.conn.CloseNow()
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	p, e, w := med(pluginT), med(elT), med(wsT)
	b.ReportMetric(e, "elevenlabs-first-audio-ms")
	b.ReportMetric(w, "websocket-first-audio-ms")
	b.ReportMetric(p, "plugin-first-frame-ms")
	b.ReportMetric(e/w, "elevenlabs/websocket")
	b.ReportMetric(p/w, "plugin/websocket")
}
