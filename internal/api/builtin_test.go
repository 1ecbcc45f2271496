package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// fliteYAML is the real talker and vocoder with the enhance stage, without
// the aligner: it runs as soon as those engines are built in.
const fliteYAML = `
pipeline:
  name: flite
  input: text
  stages:
    - {id: 0, name: talker,  engine: flite-talker,  input: text,   output: frames}
    - {id: 1, name: vocoder, engine: flite-vocoder, input: frames, output: audio, final_output: true}
    - {id: 2, name: enhance, engine: audio-enhance, input: audio,  output: audio, final_output: true}
deploy:
  stages:
    - {id: 2, options: {sample_rate: 24000}}
`

// realFixture serves a pipeline on the engines internal/engine/shipped
// registers, or skips the test, naming the missing engine, when the build
// lacks one.
func realFixture(t testing.TB, ref, yaml string) *fixture {
	t.Helper()
	var cfg *pipeline.Config
	var err error
	if ref != "" {
		cfg, err = pipeline.Load(ref)
	} else {
		cfg, err = pipeline.Parse([]byte(yaml), "test.yaml")
	}
	if err != nil {
		t.Fatal(err)
	}
	return realFixtureWith(t, cfg, nil)
}

// realFixtureWith is realFixture for cfg, whose stages outside this
// process are built by placements.
func realFixtureWith(t testing.TB, cfg *pipeline.Config, placements map[pipeline.Placement]orchestrator.Placement) *fixture {
	t.Helper()
	engines := shipped.Registry()
	for id := range cfg.Route.NumIDs() {
		if name, _ := cfg.StageSpec(id, 0); !slices.Contains(engines.Names(), name) {
			t.Skipf("pipeline %s needs engine %s, which internal/engine/shipped does not register in this build (it has %v)", cfg.Pipeline.Name, name, engines.Names())
		}
	}
	reg := prometheus.NewRegistry()
	o, err := orchestrator.New(cfg, orchestrator.Options{Registry: engines, Registerer: reg, Placements: placements})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := o.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if err := o.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := New([]*orchestrator.Orchestrator{o}, Options{Registry: reg, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ts.Close()
	})
	f := &fixture{orch: o, srv: srv, ts: ts, url: ts.URL, reg: reg, client: &http.Client{Transport: tr}}
	f.t, _ = t.(*testing.T)
	return f
}

// TestBuiltinParamsRefused checks on the real engines that each refuses
// an unknown param with the same message, that the skipped enhance stage's
// params and the aligner's of an audio-only request are checked too, and
// that nothing runs for any of them.
func TestBuiltinParamsRefused(t *testing.T) {
	f := realFixture(t, "builtin:tts-raw", "") // 0 -> 1, enhance (2) skipped, aligner 3
	for _, tc := range []struct {
		id   int
		want string
	}{
		{0, "sampling_params[0]: stage 0 (talker): invalid sampling params: pitch: unknown field; this stage takes only voice and speed"},
		{1, "sampling_params[1]: stage 1 (vocoder): invalid sampling params: pitch: unknown field; this stage takes only seed"},
		{2, "sampling_params[2]: stage 2 (enhance): invalid sampling params: pitch: unknown field; this stage takes only sample_rate and normalize"},
		{3, "sampling_params[3]: stage 3 (aligner): invalid sampling params: pitch: unknown field; this stage takes no sampling params"},
	} {
		params := make([]any, 4)
		params[tc.id] = map[string]any{"pitch": 2}
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/generate",
			map[string]any{"input": "hello", "output_modalities": []string{"audio"}, "sampling_params": params})
		wantError(t, resp, body, http.StatusBadRequest, "bad_request", tc.want)
	}
	for _, l := range strings.Split(grepLines(f.metricsText(), "omnistage_stage_duration_seconds_count"), "\n") {
		if !strings.HasSuffix(l, " 0") {
			t.Errorf("a stage ran: %s", l)
		}
	}
}

// TestBuiltinUnspeakableRefused: text the voices have nothing of to speak
// (another script) is refused at admission, by the talker's check, with
// what the voices can speak, and nothing runs; ligatures and full-width
// letters are Latin and spoken.
func TestBuiltinUnspeakableRefused(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	for _, text := range []string{"Привет мир", "Γειά σου κόσμε", "日本語"} {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts", "input": text, "response_format": "pcm"})
		wantError(t, resp, body, http.StatusBadRequest, "bad_request", "stage 0 (talker): flite-talker: invalid input: text has nothing to speak (no letters or digits): the voices speak English")
	}
	for _, l := range strings.Split(grepLines(f.metricsText(), "omnistage_stage_duration_seconds_count"), "\n") {
		if !strings.HasSuffix(l, " 0") {
			t.Errorf("a stage ran: %s", l)
		}
	}
	for _, text := range []string{"\ufb01ne \ufb02ow", "\uff28\uff49 there"} {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts", "input": text, "response_format": "pcm"})
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("%q: %d %s", text, resp.StatusCode, body)
		}
	}
}

const realText = "The quick brown fox jumps over the lazy dog. It was not amused."

func TestBuiltinSpeech(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
		map[string]any{"model": "tts-1", "input": realText, "voice": "nova", "response_format": "wav"}, "X-Word-Timestamps", "true")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	a, err := audio.ReadWAV(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ms := len(a.Samples) * 1000 / a.SampleRate
	if a.SampleRate != 16000 || ms < 2000 || ms > 10000 {
		t.Errorf("%d Hz, %d ms of audio", a.SampleRate, ms)
	}
	var words []engine.Word
	if err := json.Unmarshal([]byte(resp.Header.Get("X-Word-Timestamps")), &words); err != nil {
		t.Fatalf("X-Word-Timestamps %q: %v", resp.Header.Get("X-Word-Timestamps"), err)
	}
	if len(words) != len(strings.Fields(realText)) {
		t.Errorf("%d words: %+v", len(words), words)
	}
	last := 0
	for _, w := range words {
		if w.StartMs < last || w.EndMs < w.StartMs || w.EndMs > ms {
			t.Errorf("word %+v after %d ms in %d ms of audio", w, last, ms)
		}
		last = w.EndMs
	}
}

// TestBuiltinRunChain checks on the real engines that a /v1/run chain and
// one /v1/generate give the same samples and timestamps.
func TestBuiltinRunChain(t *testing.T) {
	for _, tc := range []struct {
		name, ref, yaml string
		mods            []string
	}{
		{"tts", "builtin:tts", "", []string{"audio", "timestamps"}},
		{"tts-24k", "builtin:tts-24k", "", []string{"audio", "timestamps"}},
		{"flite+enhance", "", fliteYAML, []string{"audio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := realFixture(t, tc.ref, tc.yaml)
			params := make([]any, f.srv.def.cfg.Route.NumIDs())
			params[0] = map[string]any{"voice": "rms", "speed": 1.25}
			answers := runChain(t, func(int) *fixture { return f }, map[string]any{
				"stage_input": map[string]any{"text": realText}, "output_modalities": tc.mods, "sampling_params": params,
			})
			var gen apijson.GenerateResponse
			f.post("/v1/generate", map[string]any{"input": realText, "output_modalities": tc.mods, "sampling_params": params}, &gen)
			sameOutputs(t, answers[len(answers)-1].Output, gen)
		})
	}
}

func TestBuiltinSpeechStream(t *testing.T) {
	f := realFixture(t, "", fliteYAML)
	var whole, streamed []int16
	for _, sf := range []string{"", "audio"} {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech",
			map[string]any{"model": "flite", "input": realText, "response_format": "pcm", "stream_format": sf})
		if resp.StatusCode != 200 || resp.Header.Get("X-Sample-Rate") != "24000" {
			t.Fatalf("stream_format %q: %d, rate %q: %s", sf, resp.StatusCode, resp.Header.Get("X-Sample-Rate"), body)
		}
		s, err := audio.PCMSamples(body)
		if err != nil {
			t.Fatal(err)
		}
		if sf == "" {
			whole = s
		} else {
			streamed = s
		}
	}
	if len(whole) < 24000 || !slices.Equal(whole, streamed) {
		t.Errorf("whole answer has %d samples, streamed %d, or they differ", len(whole), len(streamed))
	}
}

// TestVoices checks GET /v1/audio/voices on the real talker, and that a
// voice may be sent as a name or an object, in any case, or as an alias.
func TestVoices(t *testing.T) {
	f := realFixture(t, "", fliteYAML)
	resp, body := f.do(context.Background(), http.MethodGet, "/v1/audio/voices", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var list apijson.VoiceList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	byID := map[string]apijson.VoiceEntry{}
	for _, v := range list.Voices {
		byID[v.ID] = v
	}
	if v := byID["slt"]; v.Language != "en-US" || v.Name == "" || v.AliasOf != "" {
		t.Errorf("slt: %+v", v)
	}
	if v := byID["onyx"]; v.AliasOf != "rms" || v.Language != "en-US" || v.Gender != "male" {
		t.Errorf("onyx: %+v", v)
	}
	// Only the voices this pipeline can speak: kal16 makes segments, and its
	// talker outputs frames.
	if len(list.Voices) != len(pipeline.DefaultVoiceAliases)+3 {
		t.Errorf("%d voices listed, want the 3 clustergen voices and %d aliases", len(list.Voices), len(pipeline.DefaultVoiceAliases))
	}
	if v, ok := byID["kal16"]; ok {
		t.Errorf("kal16 listed, though this pipeline's talker outputs frames: %+v", v)
	}
	var samples [3]int
	for i, voice := range []any{"RMS", map[string]any{"id": "onyx"}, "alloy"} {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "flite", "input": "Hello.", "voice": voice, "response_format": "pcm"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("voice %v: status %d: %s", voice, resp.StatusCode, body)
		}
		samples[i] = len(body)
	}
	if samples[0] != samples[1] || samples[0] == samples[2] {
		t.Errorf("RMS and onyx (rms) gave %d and %d bytes, alloy (slt) %d: want the first two equal", samples[0], samples[1], samples[2])
	}
	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "flite", "input": "Hello.", "voice": "hal"})
	wantError(t, resp, body, 400, "bad_request", "voices are slt, rms, awb, and the aliases")
}

// TestCaptions checks POST /v1/audio/captions on the built-in pipeline:
// cues in WebVTT (default) and SRT, in the input's own words.
func TestCaptions(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	input := "Hello there! The fox paid $5 for 2 apples."
	for _, tc := range []struct{ format, contentType, head string }{
		{"", "text/vtt; charset=utf-8", "WEBVTT\n\n00:00:00."},
		{"srt", "application/x-subrip; charset=utf-8", "1\n00:00:00,"},
	} {
		req := map[string]any{"model": "tts", "input": input, "voice": "rms"}
		if tc.format != "" {
			req["response_format"] = tc.format
		}
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/captions", req)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType {
			t.Fatalf("%q: status %d, %s: %s", tc.format, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if !strings.HasPrefix(string(body), tc.head) || !strings.Contains(string(body), "\nHello there!\n") || !strings.Contains(string(body), "$5 for 2 apples.\n") {
			t.Errorf("%q captions:\n%s", tc.format, body)
		}
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/captions", map[string]any{"model": "tts", "input": "hi", "response_format": "mp3"})
	wantError(t, resp, body, 400, "bad_request", "use vtt or srt")
}

// TestStreamedTimestamps checks that on the built-in pipeline the word
// timestamps of SSE speech come as the aligner settles them (the first
// words early, then the rest of each sentence: at least one event per
// sentence), interleaved with the audio (the first before the last audio
// delta), and equal those of the whole answer's X-Word-Timestamps header.
func TestStreamedTimestamps(t *testing.T) {
	f := realFixture(t, "builtin:tts", "")
	input := "The first sentence is short. The second one takes a little longer to say. And a third!"
	req := map[string]any{"model": "tts", "input": input, "response_format": "pcm", "stream_format": "sse"}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", req, "X-Word-Timestamps", "true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var streamed []engine.Word
	var types []string
	for _, data := range readSSE(t, bytes.NewReader(body)) {
		var ev apijson.SpeechEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == apijson.SpeechTimestamps {
			streamed = append(streamed, ev.Words...)
		}
	}
	first, lastDelta := slices.Index(types, apijson.SpeechTimestamps), 0
	for i, typ := range types {
		if typ == apijson.SpeechDelta {
			lastDelta = i
		}
	}
	if n := strings.Count(strings.Join(types, " "), apijson.SpeechTimestamps); n < 3 || first > lastDelta {
		t.Errorf("%d timestamps events, the first at %d, the last audio at %d; want at least 3 (one per sentence), the first before the last audio: %v", n, first, lastDelta, types)
	}

	delete(req, "stream_format")
	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", req, "X-Word-Timestamps", "true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var whole []engine.Word
	if err := json.Unmarshal([]byte(resp.Header.Get("X-Word-Timestamps")), &whole); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(streamed, whole) {
		t.Errorf("streamed timestamps differ from the whole answer's:\n%v\n%v", streamed, whole)
	}
}
