package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/testkit"
)

func wavSamples(t *testing.T, a *apijson.Audio) []int16 {
	t.Helper()
	if a == nil || a.Format != "wav" {
		t.Fatalf("audio %+v is not a wav", a)
	}
	w, err := audio.ReadWAV(bytes.NewReader(a.Data))
	if err != nil {
		t.Fatal(err)
	}
	if w.SampleRate != a.SampleRate || a.DurationMs != len(w.Samples)*1000/w.SampleRate {
		t.Errorf("audio says %d Hz, %d ms; the WAV holds %d samples at %d Hz", a.SampleRate, a.DurationMs, len(w.Samples), w.SampleRate)
	}
	return w.Samples
}

func TestGenerateWhole(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	want := expectedSpeech(hello, "slt", 1)
	ms := len(want) * 1000 / fakeRate

	var resp apijson.GenerateResponse
	f.post("/v1/generate", map[string]any{"input": hello}, &resp)
	if len(resp.Outputs) != 1 || resp.RequestID == "" {
		t.Fatalf("answer %+v", resp)
	}
	o := resp.Outputs[0]
	if o.Stage != 1 || o.Modality != "audio" || !o.Finished || o.Timestamps != nil {
		t.Errorf("output %+v", o)
	}
	if got := wavSamples(t, o.Audio); !slices.Equal(got, want) {
		t.Errorf("audio differs")
	}

	resp = apijson.GenerateResponse{}
	f.post("/v1/generate", map[string]any{
		"input": map[string]any{"text": hello}, "output_modalities": []string{"timestamps", "audio"},
		"sampling_params": []any{map[string]any{"voice": "rms"}, nil, nil}, "request_id": "gen-1",
	}, &resp)
	if resp.RequestID != "gen-1" || len(resp.Outputs) != 2 {
		t.Fatalf("answer %+v", resp)
	}
	a, ts := resp.Outputs[0], resp.Outputs[1]
	if a.Stage != 1 || a.Modality != "audio" || a.Finished || ts.Stage != 2 || ts.Modality != "timestamps" || !ts.Finished {
		t.Errorf("outputs %+v / %+v", a, ts)
	}
	if got := wavSamples(t, a.Audio); !slices.Equal(got, expectedSpeech(hello, "rms", 1)) {
		t.Errorf("audio differs")
	}
	checkWords(t, ts.Timestamps, hello, ms)

	resp = apijson.GenerateResponse{}
	f.post("/v1/generate", map[string]any{"input": "one two"}, &resp, "X-Request-Id", "from-header")
	if resp.RequestID != "from-header" {
		t.Errorf("request id %q", resp.RequestID)
	}
}

// readEvents reads a streamed /v1/generate answer.
func readEvents(t *testing.T, body []byte, sse bool) []apijson.Event {
	t.Helper()
	var lines [][]byte
	if sse {
		lines = readSSE(t, bytes.NewReader(body))
	} else {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
	}
	var evs []apijson.Event
	for _, l := range lines {
		var ev apijson.Event
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("event %s: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestGenerateStream(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	want := expectedSpeech(hello, "slt", 1)
	for _, tc := range []struct {
		stream any
		sse    bool
		ctype  string
	}{{true, false, "application/x-ndjson"}, {"ndjson", false, "application/x-ndjson"}, {"sse", true, "text/event-stream"}} {
		for _, stamps := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/timestamps=%v", tc.stream, stamps), func(t *testing.T) {
				mods := []string{"audio"}
				if stamps {
					mods = append(mods, "timestamps")
				}
				resp, body := f.do(context.Background(), http.MethodPost, "/v1/generate",
					map[string]any{"input": hello, "stream": tc.stream, "output_modalities": mods, "request_id": "s1"})
				if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype {
					t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
				evs := readEvents(t, body, tc.sse)
				var pcm []byte
				var words []engine.Word
				for i, ev := range evs {
					if ev.RequestID != "s1" {
						t.Errorf("event %d request_id %q", i, ev.RequestID)
					}
					if i == len(evs)-1 {
						if ev.Type != apijson.EventDone {
							t.Errorf("last event %+v", ev)
						}
						continue
					}
					switch {
					case ev.Type != apijson.EventOutput || ev.Stage == nil:
						t.Errorf("event %d: %+v", i, ev)
					case ev.Audio != nil:
						if *ev.Stage != 1 || ev.Modality != "audio" || ev.Final == stamps || ev.Audio.Format != "pcm" || ev.Audio.SampleRate != fakeRate {
							t.Errorf("audio event %+v", ev)
						}
						pcm = append(pcm, ev.Audio.Data...)
					case ev.Timestamps != nil:
						if *ev.Stage != 2 || !ev.Final || ev.Modality != "timestamps" {
							t.Errorf("timestamps event %+v", ev)
						}
						words = append(words, ev.Timestamps...)
					}
				}
				if len(evs) != len(strings.Fields(hello))+1+map[bool]int{true: 1}[stamps] {
					t.Errorf("%d events", len(evs))
				}
				if got, _ := audio.PCMSamples(pcm); !slices.Equal(got, want) {
					t.Errorf("audio differs: %d samples, want %d", len(got), len(want))
				}
				if stamps {
					checkWords(t, words, hello, len(want)*1000/fakeRate)
				}
			})
		}
	}
}

// generateRefusals are bodies (and headers) POST /v1/generate refuses on
// the fake speech pipeline; FuzzRequestBodies starts from them too.
var generateRefusals = []refusal{
	{"no input", map[string]any{}, nil, 400, "bad_request", "input is missing"},
	{"empty input", map[string]any{"input": ""}, nil, 400, "bad_request", "input is missing"},
	{"input number", map[string]any{"input": 5}, nil, 400, "invalid_json", "input must be a string, an object"},
	{"input object extra", map[string]any{"input": map[string]any{"text": "a", "lang": "en"}}, nil, 400, "invalid_json", `unknown field "lang"`},
	{"bad stream", map[string]any{"input": "a", "stream": "yes"}, nil, 400, "invalid_json", `"ndjson" or "sse"`},
	{"unknown modality", map[string]any{"input": "a", "output_modalities": []string{"video"}}, nil, 400, "bad_request", `unknown output modality "video"`},
	{"frames", map[string]any{"input": "a", "output_modalities": []string{"frames"}}, nil, 400, "bad_request", "intermediate kind"},
	{"params not object", map[string]any{"input": "a", "sampling_params": []any{"slt"}}, nil, 400, "bad_request", "sampling_params[0] is not a JSON object or null"},
	{"params too short", map[string]any{"input": "a", "sampling_params": []any{nil}}, nil, 400, "bad_request", "needs at least 2"},
	{"params too long", map[string]any{"input": "a", "sampling_params": []any{nil, nil, nil, nil}}, nil, 400, "bad_request", "only 3 stage ids"},
	{"params unknown to engine", map[string]any{"input": "a", "sampling_params": []any{map[string]any{"pitch": 3}, nil}}, nil, 400, "bad_request", "pitch"},
	{"modality 100000 times", map[string]any{"input": "a", "output_modalities": slices.Repeat([]string{"audio"}, 100_000)}, nil, 400, "bad_request", `output_modalities[1]: "audio" is already output_modalities[0]`},
	{"ids differ", map[string]any{"input": "a", "request_id": "x"}, []string{"X-Request-Id", "y"}, 400, "bad_request", "differ"},
	{"bad id", map[string]any{"input": "a", "request_id": "has space"}, nil, 400, "bad_request", "printable"},
}

func TestGenerateRefused(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	for _, tc := range generateRefusals {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/generate", tc.body, tc.hdr...)
			wantError(t, resp, body, tc.status, tc.code, tc.msg)
		})
	}
}

// requestChecks are output_modalities and sampling_params for threeYAML
// with the route 0 -> 1 (post, 2, skipped; aligner 3), and the message
// they are refused with ("" when they are not).
var requestChecks = []struct {
	name   string
	mods   []string
	params []any
	msg    string
}{
	{"defaults", nil, nil, ""},
	{"every stage id", []string{"audio", "timestamps"}, []any{map[string]any{"voice": "rms"}, nil, map[string]any{}, nil}, ""},
	{"modality twice", []string{"audio", "timestamps", "audio"}, nil, `output_modalities[2]: "audio" is already output_modalities[0]`},
	{"intermediate modality", []string{"frames"}, nil, `output_modalities[0]: "frames" is an intermediate kind`},
	{"unknown modality first", []string{"smell"}, []any{map[string]any{"voice": "bogus"}}, `output_modalities[0]: unknown output modality "smell"`},
	{"bad voice before short array", nil, []any{map[string]any{"voice": "bogus"}}, `sampling_params[0]: stage 0 (talker): invalid sampling params: voice: unknown voice "bogus"`},
	{"bad voice before long array", nil, []any{map[string]any{"voice": "bogus"}, nil, nil, nil, nil}, `unknown voice "bogus"`},
	{"short array", nil, []any{map[string]any{"voice": "rms"}}, "sampling_params has 1 entries but this request runs stage 1: it needs at least 2"},
	{"skipped stage's params", nil, []any{nil, nil, map[string]any{"gain": 2}}, "sampling_params[2]: stage 2 (post): invalid sampling params: gain: unknown field; this stage takes no sampling params"},
	{"aligner's params, audio only", []string{"audio"}, []any{nil, nil, nil, map[string]any{"beam": 1}}, "sampling_params[3]: stage 3 (aligner): invalid sampling params: beam: unknown field; this stage takes no sampling params"},
	{"not an object", nil, []any{nil, []int{1}}, "sampling_params[1] is not a JSON object or null"},
}

// requestCheckBodies are the bodies of POST /v1/generate and of stage 0's
// POST /v1/run for a requestChecks entry.
func requestCheckBodies(mods []string, params []any) map[string]map[string]any {
	bodies := map[string]map[string]any{
		"/v1/generate": {"input": "a b"},
		"/v1/run":      {"stage_id": 0, "stage_input": map[string]any{"text": "a b"}},
	}
	for _, body := range bodies {
		if mods != nil {
			body["output_modalities"] = mods
		}
		if params != nil {
			body["sampling_params"] = params
		}
	}
	return bodies
}

// TestRequestChecksOnEveryPath posts requestChecks to POST /v1/generate
// and to the entry of POST /v1/run: both refuse them with the same
// message, the params of the skipped stage and of the aligner an
// audio-only request does not run included, and a bad value before a
// wrong length.
func TestRequestChecksOnEveryPath(t *testing.T) {
	f := newFixture(t, setup{yaml: fmt.Sprintf(threeYAML, "stage_transitions: [[0, 1]]")})
	for _, tc := range requestChecks {
		for path, body := range requestCheckBodies(tc.mods, tc.params) {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				resp, b := f.do(context.Background(), http.MethodPost, path, body)
				if tc.msg == "" {
					if resp.StatusCode != http.StatusOK {
						t.Errorf("%d %s", resp.StatusCode, b)
					}
					return
				}
				wantError(t, resp, b, http.StatusBadRequest, "bad_request", tc.msg)
			})
		}
	}
}

// blocker holds testengine stage b at its second chunk until the request
// is cancelled (or, when stubborn, until released whatever happens).
type blocker struct {
	reached  chan string // request ids that reached the block
	release  chan struct{}
	stubborn bool
}

func newBlocker(stubborn bool) *blocker {
	return &blocker{reached: make(chan string, 16), release: make(chan struct{}), stubborn: stubborn}
}

func (b *blocker) hooks() *testengine.Hooks {
	return &testengine.Hooks{Chunk: func(ctx context.Context, e *testengine.Engine, job *engine.Job, n int) error {
		if e.Spec.Name != "b" || n != 1 || strings.HasPrefix(job.RequestID, "free") {
			return nil
		}
		b.reached <- job.RequestID
		if b.stubborn {
			<-b.release
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.release:
			return nil
		}
	}}
}

func TestAbortAndReuse(t *testing.T) {
	b := newBlocker(false)
	f := newFixture(t, setup{yaml: fmt.Sprintf(textYAML, "2s"), hooks: b.hooks()})
	ctx := context.Background()

	resp, err := f.send(ctx, http.MethodPost, "/v1/generate", map[string]any{"input": "one two three", "stream": "ndjson", "request_id": "r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatalf("no first event: %v", sc.Err())
	}
	var first apijson.Event
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Type != apijson.EventOutput || !strings.HasPrefix(first.Text, "one|") {
		t.Fatalf("first event %s: %v", sc.Bytes(), err)
	}
	<-b.reached

	st, body := f.do(ctx, http.MethodGet, "/v1/requests/r1", nil)
	if st.StatusCode != 200 || !strings.Contains(string(body), `"state":"active"`) {
		t.Errorf("lookup: %d %s", st.StatusCode, body)
	}
	dup, body := f.do(ctx, http.MethodPost, "/v1/generate", map[string]any{"input": "again", "request_id": "r1"})
	wantError(t, dup, body, http.StatusConflict, "conflict", `"r1" is still in use`)
	// The refused duplicate is counted by its outcome, while r1 runs on.
	if m := f.metricsText(); !strings.Contains(m, `omnistage_requests_total{outcome="conflict"} 1`) {
		t.Errorf("the 409 is not counted:\n%s", grepLines(m, "omnistage_requests_total"))
	}

	del, body := f.do(ctx, http.MethodDelete, "/v1/requests/r1", nil)
	if del.StatusCode != 200 || string(bytes.TrimSpace(body)) != `{"id":"r1","state":"aborted"}` {
		t.Errorf("abort: %d %s", del.StatusCode, body)
	}
	var last apijson.Event
	for sc.Scan() {
		_ = json.Unmarshal(sc.Bytes(), &last)
	}
	if last.Type != apijson.EventError || last.Error == nil || last.Error.Code != "aborted" {
		t.Errorf("stream ended with %+v", last)
	}

	st, body = f.do(ctx, http.MethodGet, "/v1/requests/r1", nil)
	wantError(t, st, body, 404, "not_found", "r1")
	del, body = f.do(ctx, http.MethodDelete, "/v1/requests/r1", nil)
	wantError(t, del, body, 404, "not_found", "r1")

	var again apijson.GenerateResponse
	close(b.release)
	f.post("/v1/generate", map[string]any{"input": "one two", "request_id": "r1"}, &again)
	if again.RequestID != "r1" || len(again.Outputs) != 1 || again.Outputs[0].Text != "one|btwo|a.0|b" {
		t.Errorf("reused id answer %+v", again)
	}
}

func TestAbortFailed(t *testing.T) {
	b := newBlocker(true)
	f := newFixture(t, setup{yaml: fmt.Sprintf(textYAML, "100ms"), hooks: b.hooks()})
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		resp, err := f.send(ctx, http.MethodPost, "/v1/generate", map[string]any{"input": "one two", "request_id": "stuck"})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-b.reached
	del, body := f.do(ctx, http.MethodDelete, "/v1/requests/stuck", nil)
	wantError(t, del, body, http.StatusGatewayTimeout, "abort_failed", "did not drain")
	st, body := f.do(ctx, http.MethodGet, "/v1/requests/stuck", nil)
	if st.StatusCode != 200 || !strings.Contains(string(body), `"state":"abort_failed"`) {
		t.Errorf("lookup: %d %s", st.StatusCode, body)
	}
	dup, body := f.do(ctx, http.MethodPost, "/v1/generate", map[string]any{"input": "x", "request_id": "stuck"})
	wantError(t, dup, body, http.StatusConflict, "conflict", "abort_failed")
	close(b.release)
	testkit.Eventually(t, "the stuck request to end", func() bool {
		_, ok := f.orch.Lookup("stuck")
		return !ok
	})
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

func TestClientDisconnectAborts(t *testing.T) {
	for _, stream := range []any{false, "sse"} {
		t.Run(fmt.Sprint(stream), func(t *testing.T) {
			b := newBlocker(false)
			f := newFixture(t, setup{yaml: fmt.Sprintf(textYAML, "2s"), hooks: b.hooks()})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				resp, err := f.send(ctx, http.MethodPost, "/v1/generate", map[string]any{"input": "one two", "request_id": "gone", "stream": stream})
				if err == nil {
					_, err = bufio.NewReader(resp.Body).ReadBytes(0)
					resp.Body.Close()
				}
				errc <- err
			}()
			<-b.reached
			cancel()
			if err := <-errc; err == nil {
				t.Error("the client's request did not fail")
			}
			testkit.Eventually(t, "the request to end", func() bool {
				_, ok := f.orch.Lookup("gone")
				return !ok && f.orch.Stats().Bindings() == 0 && f.orch.Stats().InFlight == 0
			})
			metrics := f.metricsText()
			if !strings.Contains(metrics, `omnistage_requests_total{outcome="aborted"} 1`) {
				t.Errorf("no aborted request counted:\n%s", grepLines(metrics, "omnistage_requests_total"))
			}
		})
	}
}

func (f *fixture) metricsText() string {
	f.t.Helper()
	resp, body := f.do(context.Background(), http.MethodGet, "/metrics", nil)
	if resp.StatusCode != 200 {
		f.t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestOverloaded(t *testing.T) {
	b := newBlocker(false)
	yaml := strings.Replace(fmt.Sprintf(textYAML, "2s"), "deploy:\n", "deploy:\n  max_inflight: 1\n", 1)
	f := newFixture(t, setup{yaml: yaml, hooks: b.hooks()})
	errc := make(chan error, 1)
	go func() {
		resp, err := f.send(context.Background(), http.MethodPost, "/v1/generate", map[string]any{"input": "one two", "request_id": "busy"})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-b.reached
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "text", "input": "hi"})
	// The text pipeline has no audio: a 400 before admission.
	wantError(t, resp, body, 400, "bad_request", `no stage on the route produces output "audio"`)
	resp, body = f.do(context.Background(), http.MethodPost, "/v1/generate", map[string]any{"input": "more"})
	wantError(t, resp, body, http.StatusServiceUnavailable, "overloaded", "server busy")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	close(b.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
