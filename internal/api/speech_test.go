package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/quote"
	"github.com/omnistage/omnistage/internal/testkit"
)

const hello = "Hello there, this is omnistage speaking."

func TestSpeechWhole(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	for _, tc := range []struct {
		name   string
		req    map[string]any
		voice  string
		speed  float64
		format string
	}{
		{"wav", map[string]any{"model": "tts-1", "input": hello, "response_format": "WAV"}, "slt", 1, "wav"},
		{"wav explicit", map[string]any{"model": "speech", "input": hello, "response_format": "wav", "voice": "alloy"}, "slt", 1, "wav"},
		{"pcm", map[string]any{"model": "gpt-4o-mini-tts", "input": hello, "response_format": "pcm", "instructions": "cheerful"}, "slt", 1, "pcm"},
		{"onyx maps to rms", map[string]any{"model": "tts-1-hd", "input": hello, "voice": "onyx", "response_format": "wav"}, "rms", 1, "wav"},
		{"fable maps to awb", map[string]any{"model": "tts-1", "input": hello, "voice": "Fable", "response_format": "wav"}, "awb", 1, "wav"},
		{"speed 2", map[string]any{"model": "tts-1", "input": hello, "voice": "echo", "speed": 2, "response_format": "wav"}, "rms", 2, "wav"},
		{"speed 0.25", map[string]any{"model": "tts-1", "input": hello, "speed": 0.25}, "slt", 0.25, "pcm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.format == "pcm" {
				tc.req["response_format"] = "pcm"
			}
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", tc.req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("X-Sample-Rate"); got != "16000" {
				t.Errorf("X-Sample-Rate %q, want 16000", got)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			if resp.ContentLength != int64(len(body)) {
				t.Errorf("Content-Length %d, body %d bytes", resp.ContentLength, len(body))
			}
			want := expectedSpeech(hello, tc.voice, tc.speed)
			var got []int16
			if tc.format == "wav" {
				if ct := resp.Header.Get("Content-Type"); ct != "audio/wav" {
					t.Errorf("Content-Type %q", ct)
				}
				a, err := audio.ReadWAV(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if a.SampleRate != fakeRate {
					t.Errorf("rate %d", a.SampleRate)
				}
				got = a.Samples
			} else {
				if ct := resp.Header.Get("Content-Type"); ct != "audio/pcm" {
					t.Errorf("Content-Type %q", ct)
				}
				var err error
				if got, err = audio.PCMSamples(body); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %d samples, want %d (or they differ)", len(got), len(want))
			}
		})
	}
}

// speechRefusals are bodies (and headers) POST /v1/audio/speech refuses on
// the fake speech pipeline; FuzzRequestBodies starts from them too.
var speechRefusals = []refusal{
	{"unknown format", map[string]any{"model": "tts-1", "input": "hi", "response_format": "ogg"}, nil, 400, "bad_request", "use mp3, opus, aac, flac, wav, pcm"},
	{"unknown voice", map[string]any{"model": "tts-1", "input": "hi", "voice": "hal"}, nil, 400, "bad_request", `unknown voice "hal"`},
	{"unknown voice object", map[string]any{"model": "tts-1", "input": "hi", "voice": map[string]any{"id": "v"}}, nil, 400, "bad_request", `unknown voice "v"`},
	{"bad voice object", map[string]any{"model": "tts-1", "input": "hi", "voice": map[string]any{"name": "v"}}, nil, 400, "invalid_json", `voice must be a name or an object {"id": "name"}`},
	{"kal16 on a frames talker", map[string]any{"model": "tts-1", "input": "hi", "voice": "kal16"}, nil, 400, "bad_request", "kal16"},
	{"speed too high", map[string]any{"model": "tts-1", "input": "hi", "speed": 4.5}, nil, 400, "bad_request", "0.25..4"},
	{"speed too low", map[string]any{"model": "tts-1", "input": "hi", "speed": 0.1}, nil, 400, "bad_request", "outside"},
	{"speed string", map[string]any{"model": "tts-1", "input": "hi", "speed": "fast"}, nil, 400, "invalid_json", "speed"},
	{"unknown model", map[string]any{"model": "whisper-1", "input": "hi"}, nil, 404, "model_not_found", "whisper-1"},
	{"no model", map[string]any{"input": "hi"}, nil, 400, "bad_request", "model is missing"},
	{"no input", map[string]any{"model": "tts-1"}, nil, 400, "bad_request", "input is missing"},
	{"unknown field", map[string]any{"model": "tts-1", "input": "hi", "temperature": 1}, nil, 400, "invalid_json", `unknown field "temperature"`},
	{"bad stream_format", map[string]any{"model": "tts-1", "input": "hi", "stream_format": "chunks"}, nil, 400, "bad_request", "stream_format"},
	{"timestamps on chunked audio", map[string]any{"model": "tts-1", "input": "hi", "stream_format": "audio"}, []string{"X-Word-Timestamps", "true"}, 400, "bad_request", "stream_format sse"},
	{"bad timestamps header", map[string]any{"model": "tts-1", "input": "hi"}, []string{"X-Word-Timestamps", "maybe"}, 400, "bad_request", "X-Word-Timestamps"},
	{"not JSON", "model=tts-1", nil, 400, "invalid_json", "not valid JSON"},
	{"empty body", "", nil, 400, "invalid_json", "empty"},
	{"array body", "[]", nil, 400, "invalid_json", "JSON object"},
	{"two values", `{"model":"tts-1","input":"hi"} {}`, nil, 400, "invalid_json", "data after its JSON value"},
}

func TestSpeechRefused(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	for _, tc := range speechRefusals {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", tc.body, tc.hdr...)
			wantError(t, resp, body, tc.status, tc.code, tc.msg)
		})
	}
}

// readSSE reads server-sent events: the data of each.
func readSSE(t *testing.T, r io.Reader) [][]byte {
	t.Helper()
	var events [][]byte
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line %q has no data field", line)
		}
		events = append(events, []byte(data))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func TestSpeechSSE(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	for _, stamps := range []bool{false, true} {
		t.Run("timestamps="+strconv.FormatBool(stamps), func(t *testing.T) {
			// The stage timings come when asked, with the timestamps here.
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
				map[string]any{"model": "tts-1", "input": hello, "stream_format": "sse", "response_format": "pcm"},
				"X-Word-Timestamps", strconv.FormatBool(stamps), "X-Stage-Timings", strconv.FormatBool(stamps))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var pcm []byte
			var types []string
			var done apijson.SpeechEvent
			var words []engine.Word
			for _, data := range readSSE(t, bytes.NewReader(body)) {
				var ev apijson.SpeechEvent
				if err := json.Unmarshal(data, &ev); err != nil {
					t.Fatalf("event %s: %v", data, err)
				}
				types = append(types, ev.Type)
				switch ev.Type {
				case apijson.SpeechDelta:
					pcm = append(pcm, ev.Audio...)
				case apijson.SpeechTimestamps:
					words = ev.Words
				case apijson.SpeechDone:
					done = ev
				case apijson.SpeechStages:
					if len(ev.Stages) < 2 || ev.Stages[0].Name != "talker" || ev.Stages[1].EndMs < ev.Stages[0].FirstOutputMs {
						t.Errorf("stages event %s", data)
					}
				}
			}
			wantTypes := []string{}
			for range strings.Fields(hello) {
				wantTypes = append(wantTypes, apijson.SpeechDelta)
			}
			if stamps {
				wantTypes = append(wantTypes, apijson.SpeechTimestamps)
			}
			if stamps {
				wantTypes = append(wantTypes, apijson.SpeechStages)
			}
			wantTypes = append(wantTypes, apijson.SpeechDone)
			if !slices.Equal(types, wantTypes) {
				t.Errorf("events %v, want %v", types, wantTypes)
			}
			want := expectedSpeech(hello, "slt", 1)
			if got, _ := audio.PCMSamples(pcm); !slices.Equal(got, want) {
				t.Errorf("deltas hold %d samples, want %d", len(got), len(want))
			}
			if done.Usage == nil || done.Usage.InputTokens != len(hello) || done.Usage.AudioDurationMs != len(want)*1000/fakeRate {
				t.Errorf("usage %+v", done.Usage)
			}
			if stamps {
				checkWords(t, words, hello, len(want)*1000/fakeRate)
			}
		})
	}
}

func checkWords(t *testing.T, words []engine.Word, text string, ms int) {
	t.Helper()
	fields := strings.Fields(text)
	if len(words) != len(fields) {
		t.Fatalf("%d words, want %d: %v", len(words), len(fields), words)
	}
	last := 0
	for i, w := range words {
		if w.Word != fields[i] || w.StartMs < last || w.EndMs < w.StartMs || w.EndMs > ms {
			t.Errorf("word %d %+v (text %q, previous end %d, audio %d ms)", i, w, fields[i], last, ms)
		}
		last = w.EndMs
	}
}

// TestSpeechStreamAudio checks that chunked audio leaves per chunk: the
// client reads the WAV header and the first word's audio while the vocoder
// is held before its second chunk.
func TestSpeechStreamAudio(t *testing.T) {
	var held atomic.Pointer[gate]
	f := newFixture(t, setup{yaml: speechYAML, fakes: &fakeHooks{chunk: func(ctx context.Context, name string, n int) error {
		if name == "test-synth" && n == 1 {
			return held.Load().wait(ctx)
		}
		return nil
	}}})
	for _, format := range []string{"wav", "pcm"} {
		t.Run(format, func(t *testing.T) {
			g := newGate()
			held.Store(g)
			resp, err := f.send(context.Background(), http.MethodPost, "/v1/audio/speech",
				map[string]any{"model": "tts-1", "input": hello, "stream_format": "audio", "response_format": format})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.ContentLength != -1 || resp.Header.Get("X-Sample-Rate") != "16000" {
				t.Fatalf("status %d, length %d, rate %q", resp.StatusCode, resp.ContentLength, resp.Header.Get("X-Sample-Rate"))
			}
			want := expectedSpeech(hello, "slt", 1)
			first := expectedSpeech(strings.Fields(hello)[0], "slt", 1)
			hl := 0
			if format == "wav" {
				hl = audio.WAVHeaderLen
			}
			head := make([]byte, hl+2*len(first))
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatalf("reading the first chunk while the vocoder is held: %v", err)
			}
			if format == "wav" && !bytes.Equal(head[:hl], audio.WAVHeader(fakeRate, audio.UnknownSize)) {
				t.Errorf("header % x is not a streaming WAV header", head[:hl])
			}
			g.open()
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := audio.PCMSamples(append(head[hl:], rest...))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %d samples, want %d", len(got), len(want))
			}
			if e := resp.Trailer.Get("X-Stream-Error"); e != "" {
				t.Errorf("X-Stream-Error %q", e)
			}
		})
	}
}

func TestSpeechTimestampsHeader(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	t.Run("header", func(t *testing.T) {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
			map[string]any{"model": "tts-1", "input": hello}, "X-Word-Timestamps", "true")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var words []engine.Word
		if err := json.Unmarshal([]byte(resp.Header.Get("X-Word-Timestamps")), &words); err != nil {
			t.Fatalf("X-Word-Timestamps %q: %v", resp.Header.Get("X-Word-Timestamps"), err)
		}
		checkWords(t, words, hello, len(expectedSpeech(hello, "slt", 1))*1000/fakeRate)
	})
	t.Run("too long for a header", func(t *testing.T) {
		long := strings.Repeat("Naïve words keep coming. ", 120)
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
			map[string]any{"model": "tts-1", "input": long, "response_format": "pcm"}, "X-Word-Timestamps", "true")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if h := resp.Header.Get("X-Word-Timestamps"); h != "" {
			t.Errorf("header set (%d bytes) for a long answer", len(h))
		}
		if h := resp.Header.Get("X-Word-Timestamps-Omitted"); !strings.Contains(h, "sse") {
			t.Errorf("X-Word-Timestamps-Omitted %q", h)
		}
		if len(body) != 2*len(expectedSpeech(long, "slt", 1)) {
			t.Errorf("body of %d bytes", len(body))
		}
	})
	t.Run("non-ASCII is escaped", func(t *testing.T) {
		resp, _ := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
			map[string]any{"model": "tts-1", "input": "naïve 😀 café"}, "X-Word-Timestamps", "true")
		h := resp.Header.Get("X-Word-Timestamps")
		var words []engine.Word
		if err := json.Unmarshal([]byte(h), &words); err != nil || strings.ContainsFunc(h, func(r rune) bool { return r > 127 }) {
			t.Fatalf("X-Word-Timestamps %q: %v", h, err)
		}
		if len(words) != 3 || words[1].Word != "😀" || words[2].Word != "café" {
			t.Errorf("words %+v", words)
		}
	})
	t.Run("off", func(t *testing.T) {
		resp, _ := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
			map[string]any{"model": "tts-1", "input": hello}, "X-Word-Timestamps", "false")
		if resp.Header.Get("X-Word-Timestamps") != "" || len(resp.Trailer) != 0 {
			t.Errorf("timestamps sent though not asked for")
		}
	})
}

// TestSpeechFailsBeforeAudio checks that an engine failure before any audio
// is a plain error status, and one after the first chunk ends the stream
// with an error event.
func TestSpeechFailsMidStream(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML, fakes: &fakeHooks{chunk: func(ctx context.Context, name string, n int) error {
		if name == "test-synth" && n == 1 {
			return &engine.InputError{Reason: "word two is unspeakable"}
		}
		return nil
	}}})
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": hello})
	wantError(t, resp, body, 400, "bad_request", "unspeakable")

	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": hello, "stream_format": "sse"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := readSSE(t, bytes.NewReader(body))
	var last apijson.SpeechEvent
	if err := json.Unmarshal(events[len(events)-1], &last); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || last.Type != "error" || last.Error == nil || !strings.Contains(last.Error.Message, "unspeakable") {
		t.Errorf("events %q", events)
	}

	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": hello, "stream_format": "audio", "response_format": "wav"})
	if resp.StatusCode != 200 || !strings.Contains(resp.Trailer.Get("X-Stream-Error"), "unspeakable") {
		t.Errorf("status %d, X-Stream-Error %q", resp.StatusCode, resp.Trailer.Get("X-Stream-Error"))
	}
	if len(body) != audio.WAVHeaderLen+2*len(expectedSpeech("Hello", "slt", 1)) {
		t.Errorf("body of %d bytes", len(body))
	}
}

// TestStreamErrorTrailerShort checks that a long failure reaches the
// X-Stream-Error trailer cut at a character boundary, through httperr.Short.
func TestStreamErrorTrailerShort(t *testing.T) {
	reason := strings.Repeat("é", quote.Max) // 2 bytes each: a byte cut falls inside one
	f := newFixture(t, setup{yaml: speechYAML, fakes: &fakeHooks{chunk: func(ctx context.Context, name string, n int) error {
		if name == "test-synth" && n == 1 {
			return &engine.InputError{Reason: reason}
		}
		return nil
	}}})
	resp, _ := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": hello, "stream_format": "audio", "response_format": "pcm"})
	got := resp.Trailer.Get("X-Stream-Error")
	if resp.StatusCode != 200 || !strings.HasPrefix(got, "bad_request: ") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("status %d, X-Stream-Error %q", resp.StatusCode, got)
	}
	if msg := strings.TrimPrefix(got, "bad_request: "); len(msg) > quote.Max+len("…") {
		t.Errorf("X-Stream-Error quotes %d bytes of the error, more than %d", len(msg), quote.Max)
	}
}

// TestStalledClient checks that a client that stops reading a stream is cut
// off after ChunkWriteTimeout and its request aborted.
func TestStalledClient(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{ChunkWriteTimeout: 200 * time.Millisecond}})
	text := strings.TrimSpace(strings.Repeat("abcdefghij ", 3000))
	resp, err := f.send(context.Background(), http.MethodPost, "/v1/audio/speech",
		map[string]any{"model": "tts-1", "input": text, "speed": 0.25, "stream_format": "audio", "response_format": "pcm"}, "X-Request-Id", "stalled")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read nothing: the socket buffers fill, a write blocks past its
	// deadline, and the request ends.
	testkit.Eventually(t, "the stalled request to end", func() bool {
		_, ok := f.orch.Lookup("stalled")
		return !ok
	})
	n, _ := io.Copy(io.Discard, resp.Body)
	if want := int64(2 * len(expectedSpeech(text, "slt", 0.25))); n >= want {
		t.Errorf("the client got all %d bytes", n)
	}
}

// TestAudioLimit checks that a request whose audio passes
// deploy.max_audio_seconds fails with a 400 that says so, whole and
// streamed, and that the server then holds nothing of it.
func TestAudioLimit(t *testing.T) {
	yaml := strings.Replace(speechYAML, "  abort_timeout: 2s\n", "  abort_timeout: 2s\n  max_audio_seconds: 1\n", 1)
	f := newFixture(t, setup{yaml: yaml})
	long := strings.Repeat("amplified ", 200) // far more than 1 s of the fakes' audio
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": long, "response_format": "pcm"})
	wantError(t, resp, body, 400, "bad_request", "passed the limit of 1 s")

	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": long, "response_format": "pcm", "stream_format": "audio"})
	if resp.StatusCode != 200 || !strings.Contains(resp.Trailer.Get("X-Stream-Error"), "passed the limit of 1 s") {
		t.Errorf("streamed: status %d, X-Stream-Error %q", resp.StatusCode, resp.Trailer.Get("X-Stream-Error"))
	}
	if n := len(body) / 2; n > 16000+16000/10 {
		t.Errorf("streamed %d samples before the limit of 1 s stopped it", n)
	}
	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "short", "response_format": "pcm"})
	if resp.StatusCode != 200 {
		t.Errorf("a short request after: %d %s", resp.StatusCode, body)
	}
}
