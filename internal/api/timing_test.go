package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// speechAnswer is a speech request's audio bytes (the deltas' joined, for
// sse) and word timestamps.
type speechAnswer struct {
	audio []byte
	words []engine.Word
}

// speak asks f for model's speech of input in format, whole or streamed
// as sse, with word timestamps.
func speak(t *testing.T, f *fixture, model, input, format string, sse bool) speechAnswer {
	t.Helper()
	req := map[string]any{"model": model, "input": input, "response_format": format}
	if sse {
		req["stream_format"] = "sse"
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", req, "X-Word-Timestamps", "true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s (sse %v): status %d: %s", format, sse, resp.StatusCode, body)
	}
	if !sse {
		var a speechAnswer
		if err := json.Unmarshal([]byte(resp.Header.Get(headerTimestamps)), &a.words); err != nil {
			t.Fatalf("%s: %s %q: %v", format, headerTimestamps, resp.Header.Get(headerTimestamps), err)
		}
		a.audio = body
		return a
	}
	var a speechAnswer
	for _, data := range readSSE(t, bytes.NewReader(body)) {
		var ev apijson.SpeechEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		switch ev.Type {
		case apijson.SpeechDelta:
			a.audio = append(a.audio, ev.Audio...)
		case apijson.SpeechTimestamps:
			a.words = append(a.words, ev.Words...)
		case apijson.SpeechError:
			t.Fatalf("%s: error event %s", format, data)
		}
	}
	return a
}

// wordShift returns how much later than ref's the words of got are, the
// same for every word's start and end, or fails the test.
func wordShift(t *testing.T, got, ref []engine.Word) int {
	t.Helper()
	if len(got) != len(ref) || len(ref) == 0 {
		t.Fatalf("%d words, want %d", len(got), len(ref))
	}
	d := got[0].StartMs - ref[0].StartMs
	for i := range ref {
		if got[i].StartMs-ref[i].StartMs != d || got[i].EndMs-ref[i].EndMs != d || got[i].Word != ref[i].Word {
			t.Fatalf("word %d is %+v, want %+v moved by %d ms", i, got[i], ref[i], d)
		}
	}
	return d
}

// TestTimestampsFollowFormat checks, on the fake engines, that an answer's
// word timestamps are on its format's timeline: those of aac, whose ADTS
// frames cannot state the encoder's 1024-sample priming, 64 ms (at 16 kHz)
// later than wav's, in the X-Word-Timestamps header and in the sse events
// alike; those of mp3 in sse events, a stream without an Info tag, 69 ms
// (LAME's 576 samples of delay and the decoder's 529) later; the others'
// as wav's. Captions for an audio_format move as a whole file's do, and
// without one are wav's.
func TestTimestampsFollowFormat(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	want := map[string]int{encode.AAC: 64}
	wantStreamed := map[string]int{encode.AAC: 64, encode.MP3: 69}
	for _, sse := range []bool{false, true} {
		ref := speak(t, f, "tts-1", hello, encode.WAV, sse)
		for _, format := range encode.Formats() {
			if encode.Available(format) != nil {
				continue // aac without ffmpeg
			}
			got := speak(t, f, "tts-1", hello, format, sse)
			w := want[format]
			if sse {
				w = wantStreamed[format]
			}
			if d := wordShift(t, got.words, ref.words); d != w {
				t.Errorf("%s (sse %v): words %d ms later than wav's, want %d", format, sse, d, w)
			}
		}
	}
	captionsOf := func(audioFormat string) []time.Duration {
		req := map[string]any{"model": "tts-1", "input": hello}
		if audioFormat != "" {
			req["audio_format"] = audioFormat
		}
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/captions", req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("captions for %q: status %d: %s", audioFormat, resp.StatusCode, body)
		}
		return cueTimes(t, body)
	}
	ref := captionsOf("")
	for _, format := range encode.Formats() {
		got := captionsOf(format)
		if len(got) != len(ref) {
			t.Fatalf("captions for %s: %d cue times, want %d", format, len(got), len(ref))
		}
		for i := range ref {
			if d := got[i] - ref[i]; d != time.Duration(want[format])*time.Millisecond {
				t.Errorf("captions for %s: cue time %d is %v later than without audio_format, want %d ms", format, i, d, want[format])
			}
		}
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/captions", map[string]any{"model": "tts-1", "input": hello, "audio_format": "ogg"})
	wantError(t, resp, body, 400, "bad_request", `unknown audio_format "ogg"`)
}

// cueLine matches a WebVTT cue's timing line.
var cueLine = regexp.MustCompile(`(?m)^(\d\d):(\d\d):(\d\d)\.(\d\d\d) --> (\d\d):(\d\d):(\d\d)\.(\d\d\d)$`)

// cueTimes returns the start and end of every cue of a WebVTT file.
func cueTimes(t *testing.T, vtt []byte) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, m := range cueLine.FindAllSubmatch(vtt, -1) {
		for i := 1; i < len(m); i += 4 {
			var v [4]int
			for j := range v {
				v[j], _ = strconv.Atoi(string(m[i+j]))
			}
			out = append(out, time.Duration(v[0])*time.Hour+time.Duration(v[1])*time.Minute+
				time.Duration(v[2])*time.Second+time.Duration(v[3])*time.Millisecond)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no cues in\n%s", vtt)
	}
	return out
}

// decodeWith decodes an answer's audio to mono samples at rate with an
// independent decoder: ffmpeg, or mpg123 for mp3 (which decodes at the
// file's rate, here the audio's); raw says the bytes are 16-bit PCM.
func decodeWith(t *testing.T, decoder string, data []byte, rate int, raw bool) []int16 {
	t.Helper()
	if _, err := exec.LookPath(decoder); err != nil {
		testdeps.Missing(t, "no %s (scripts/install-deps.sh installs it)", decoder)
	}
	args := []string{"-q", "-e", "s16", "-s", "-"}
	if decoder == "ffmpeg" {
		args = []string{"-hide_banner", "-loglevel", "error"}
		if raw {
			args = append(args, "-f", "s16le", "-ar", strconv.Itoa(rate), "-ac", "1")
		}
		args = append(args, "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", strconv.Itoa(rate), "pipe:1")
	}
	cmd := exec.Command(decoder, args...)
	cmd.Stdin = bytes.NewReader(data)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", decoder, err, errb.String())
	}
	s, err := audio.PCMSamples(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leadOf returns how many samples later than in ref the audio of got
// plays: the lag, from -rate/50 to rate/5, at which a quarter second of
// ref from start correlates best with got, normalized by got's energy.
func leadOf(ref, got []int16, rate, start int) int {
	win := ref[start : start+rate/4]
	best, bestLag := math.Inf(-1), 0
	for lag := -rate / 50; lag <= rate/5; lag++ {
		if start+lag < 0 || start+lag+len(win) > len(got) {
			continue
		}
		seg := got[start+lag : start+lag+len(win)]
		var c, e float64
		for i, v := range win {
			g := float64(seg[i])
			c += float64(v) * g
			e += g * g
		}
		if e > 0 && c/math.Sqrt(e) > best {
			best, bestLag = c/math.Sqrt(e), lag
		}
	}
	return bestLag
}

// TestWordOnsetsMatchAudio checks, on the real engines, that the word
// timestamps of every format, whole and streamed as sse, are the times at
// which independent decoders play the words: the audio, decoded, is as
// many milliseconds later than the wav answer's samples as the words are
// later than the wav answer's words, to a millisecond, and that is the
// format's delay: aac's priming; a streamed mp3's, which has no Info tag,
// LAME's and the decoder's delay; 0 for a whole mp3, whose Info tag
// states LAME's delay, and the other formats. tts-24k checks the formats
// whose delay depends on the rate.
func TestWordOnsetsMatchAudio(t *testing.T) {
	input := "Hello there! The fox paid five dollars for two apples."
	for _, pl := range []struct {
		model   string
		rate    int
		formats []string
		// wantMs is the words' shift, whole and streamed, by format.
		wantMs map[bool]map[string]int
	}{
		{"tts", 16000, encode.Formats(), map[bool]map[string]int{
			false: {encode.AAC: 64},
			true:  {encode.AAC: 64, encode.MP3: 69},
		}},
		{"tts-24k", 24000, []string{encode.MP3, encode.AAC}, map[bool]map[string]int{
			false: {encode.AAC: 43},
			true:  {encode.AAC: 43, encode.MP3: 46},
		}},
	} {
		t.Run(pl.model, func(t *testing.T) {
			f := realFixture(t, "builtin:"+pl.model, "")
			for _, sse := range []bool{false, true} {
				ref := speak(t, f, pl.model, input, encode.WAV, sse)
				wav := decodeWith(t, "ffmpeg", ref.audio, pl.rate, sse)
				start := ref.words[1].StartMs * pl.rate / 1000
				for _, format := range pl.formats {
					if err := encode.Available(format); err != nil {
						t.Logf("%s: %v", format, err)
						continue
					}
					got := speak(t, f, pl.model, input, format, sse)
					shift := wordShift(t, got.words, ref.words)
					if want := pl.wantMs[sse][format]; shift != want {
						t.Errorf("%s, sse %v: the words are %d ms later than wav's, want %d", format, sse, shift, want)
					}
					decoders := []string{"ffmpeg"}
					if format == encode.MP3 {
						decoders = append(decoders, "mpg123")
					}
					for _, dec := range decoders {
						raw := format == encode.PCM || (sse && format == encode.WAV)
						lead := leadOf(wav, decodeWith(t, dec, got.audio, pl.rate, raw), pl.rate, start)
						leadMs := float64(lead) * 1000 / float64(pl.rate)
						name := fmt.Sprintf("%s, sse %v, %s", format, sse, dec)
						t.Logf("%s: the audio plays %d samples (%.2f ms) late, the words are %d ms late", name, lead, leadMs, shift)
						if math.Abs(leadMs-float64(shift)) > 1 {
							t.Errorf("%s: the audio plays %.2f ms later than wav's, the words are %d ms later", name, leadMs, shift)
						}
					}
				}
			}
		})
	}
}
