package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/testkit"
)

// runChain posts first to stage 0's server, then each answer's stage_input
// to the server of the stage it names, until an answer is final. It
// returns every answer.
func runChain(t *testing.T, server func(stage int) *fixture, first map[string]any) []hop.RunResponse {
	t.Helper()
	var answers []hop.RunResponse
	body := first
	stage := 0
	for n := 0; ; n++ {
		if n > 8 {
			t.Fatal("the chain does not end")
		}
		body["stage_id"] = stage
		var ans hop.RunResponse
		server(stage).post("/v1/run", body, &ans)
		answers = append(answers, ans)
		if ans.Finished {
			if ans.Output == nil || ans.StageInput != "" || ans.StageID != stage {
				t.Fatalf("final answer %+v", ans)
			}
			return answers
		}
		if ans.StageInput == "" || ans.Output != nil {
			t.Fatalf("answer %+v", ans)
		}
		stage = ans.StageID
		body = map[string]any{"stage_input": ans.StageInput}
	}
}

// sameOutputs compares a /v1/run final output with a /v1/generate answer:
// for each modality, the generate output of the last stage that has it.
func sameOutputs(t *testing.T, run *apijson.Outputs, gen apijson.GenerateResponse) {
	t.Helper()
	var want apijson.Outputs
	for _, o := range gen.Outputs {
		if o.Audio != nil {
			want.Audio = o.Audio
		}
		if o.Timestamps != nil {
			want.Timestamps = o.Timestamps
		}
		if o.Text != "" {
			want.Text = o.Text
		}
	}
	got, _ := json.Marshal(run)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("/v1/run chain output\n%.300s\ndiffers from /v1/generate's\n%.300s", got, exp)
	}
}

func TestRunChainMatchesGenerate(t *testing.T) {
	text := "Stage by stage, the same words come out."
	for _, tc := range []struct {
		name  string
		yaml  string
		mods  []string
		route []int // the stages the chain visits
	}{
		{"tts audio", speechYAML, nil, []int{0, 1}},
		{"tts audio+timestamps", speechYAML, []string{"audio", "timestamps"}, []int{0, 1, 2}},
		{"tts timestamps only", speechYAML, []string{"timestamps"}, []int{0, 1, 2}},
		{"three stages", fmt.Sprintf(threeYAML, ""), []string{"audio", "timestamps"}, []int{0, 1, 2, 3}},
		{"skip", fmt.Sprintf(threeYAML, "stage_transitions: [[0, 1]]"), []string{"audio", "timestamps"}, []int{0, 1, 3}},
		{"reorder", reorderYAML, []string{"timestamps", "audio"}, []int{0, 2, 1, 3}},
		{"reorder audio", reorderYAML, nil, []int{0, 2, 1}},
		{"text stages", fmt.Sprintf(textYAML, "2s"), nil, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, setup{yaml: tc.yaml})
			n := f.srv.def.cfg.Route.NumIDs()
			params := make([]any, n)
			if !strings.Contains(tc.yaml, "test-a") {
				params[0] = map[string]any{"voice": "awb", "speed": 1.5}
			}
			answers := runChain(t, func(int) *fixture { return f }, map[string]any{
				"stage_input": map[string]any{"text": text}, "output_modalities": tc.mods,
				"sampling_params": params, "request_id": "chain-1",
			})
			var visited []int
			for i, a := range answers {
				if a.RequestID != "chain-1" {
					t.Errorf("answer %d has request_id %q", i, a.RequestID)
				}
				if i == 0 {
					visited = append(visited, 0)
				}
				if !a.Finished {
					visited = append(visited, a.StageID)
				}
			}
			if !slices.Equal(visited, tc.route) {
				t.Errorf("chain visited %v, want %v", visited, tc.route)
			}
			// Every payload carries the same transfer id.
			for i, a := range answers[:len(answers)-1] {
				env, err := payload.NewCodec(nil).Decode(a.StageInput, payload.Expect{Pipeline: f.srv.def.cfg.Pipeline.Name, Digest: f.srv.def.cfg.Digest(), Stage: a.StageID, NumStages: n})
				if err != nil {
					t.Fatalf("payload %d: %v", i, err)
				}
				if env.TransferID != "chain-1" || len(env.Params) != n {
					t.Errorf("payload %d: transfer id %q, %d params", i, env.TransferID, len(env.Params))
				}
			}
			var gen apijson.GenerateResponse
			f.post("/v1/generate", map[string]any{"input": text, "output_modalities": tc.mods, "sampling_params": params}, &gen)
			sameOutputs(t, answers[len(answers)-1].Output, gen)
		})
	}
}

// TestRunHeadless drives a chain across one headless stage server per
// stage, and checks what a stage server refuses.
func TestRunHeadless(t *testing.T) {
	yaml := fmt.Sprintf(threeYAML, "")
	servers := map[int]*fixture{}
	for id := range 4 {
		servers[id] = newFixture(t, setup{yaml: yaml, opts: Options{Stage: &id}})
	}
	text := "Four servers, one request."
	answers := runChain(t, func(stage int) *fixture { return servers[stage] }, map[string]any{
		"stage_input": map[string]any{"text": text}, "output_modalities": []string{"audio", "timestamps"},
	})
	if len(answers) != 4 {
		t.Fatalf("%d answers", len(answers))
	}
	full := newFixture(t, setup{yaml: yaml})
	var gen apijson.GenerateResponse
	full.post("/v1/generate", map[string]any{"input": text, "output_modalities": []string{"audio", "timestamps"}}, &gen)
	sameOutputs(t, answers[3].Output, gen)

	s1 := servers[1]
	for _, path := range []string{"/v1/audio/speech", "/v1/generate"} {
		resp, body := s1.do(context.Background(), http.MethodPost, path, map[string]any{})
		wantError(t, resp, body, 404, "unknown_route", "headless stage server for stage 1 (vocoder)")
	}
	// Its hops' ids are looked up and aborted as requests' are.
	resp, body := s1.do(context.Background(), http.MethodDelete, "/v1/requests/x", nil)
	wantError(t, resp, body, 404, "not_found", `no active request with id "x"`)
	resp, body = s1.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "x"}})
	wantError(t, resp, body, 400, "wrong_stage", "this server runs stage 1 (vocoder)")
	resp, body = s1.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 2, "stage_input": answers[1].StageInput})
	wantError(t, resp, body, 400, "wrong_stage", "this server runs stage 1")
	for _, path := range []string{"/health", "/ready", "/v1/models", "/metrics"} {
		if resp, body := s1.do(context.Background(), http.MethodGet, path, nil); resp.StatusCode != 200 {
			t.Errorf("GET %s on a stage server: %d %s", path, resp.StatusCode, body)
		}
	}
}

// flip returns s with its character at i changed to another base64url
// character.
func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func reencode(t *testing.T, s string, edit func([]byte) []byte) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(edit(b))
}

// stage0 runs stage 0 on f with modalities and returns the answer.
func stage0(t *testing.T, f *fixture, mods ...string) hop.RunResponse {
	t.Helper()
	var ans hop.RunResponse
	f.post("/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "some words here"}, "output_modalities": mods}, &ans)
	if ans.Finished || ans.StageID != 1 {
		t.Fatalf("stage 0 answer %+v", ans)
	}
	return ans
}

func TestRunRefused(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	p1 := stage0(t, f, "audio", "timestamps").StageInput
	other := newFixture(t, setup{yaml: strings.Replace(fmt.Sprintf(threeYAML, ""), "name: three", "name: other", 1)})
	otherP1 := stage0(t, other, "audio").StageInput
	// The same pipeline name with other stages: another configuration.
	changed := newFixture(t, setup{yaml: strings.Replace(speechYAML, "name: vocoder", "name: vocoder2", 1)})
	changedP1 := stage0(t, changed, "audio", "timestamps").StageInput

	// Envelopes that decode but do not fit the route.
	cfg := f.srv.def.cfg
	audioData := []engine.Chunk{{Audio: &engine.Audio{SampleRate: fakeRate, Samples: []int16{1, 2, 3}}}}
	craft := func(e payload.Envelope) string {
		e.Pipeline, e.Digest, e.TransferID, e.RequestID = cfg.Pipeline.Name, cfg.Digest(), "x", "x"
		e.Params = make([]json.RawMessage, cfg.Route.NumIDs())
		s, err := payload.NewCodec(nil).Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	skipFrom := craft(payload.Envelope{From: 0, To: 2, Final: 2, Outputs: []string{"timestamps"}, Data: audioData})
	wrongFinal := craft(payload.Envelope{From: 1, To: 2, Final: 1, Outputs: []string{"timestamps"}, Data: audioData})
	pastFinal := craft(payload.Envelope{From: 1, To: 2, Final: 1, Outputs: []string{"audio"}, Data: audioData})

	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		msg    string
	}{
		{"not JSON", "stage_id=1", 400, "invalid_json", "not valid JSON"},
		{"unknown field", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a"}, "stream": true}, 400, "invalid_json", `unknown field "stream"`},
		{"no stage_id", map[string]any{"stage_input": p1}, 400, "bad_request", "stage_id is missing"},
		{"stage_id string", map[string]any{"stage_id": "1", "stage_input": p1}, 400, "invalid_json", "field stage_id"},
		{"stage_id float", `{"stage_id": 1.5, "stage_input": "x"}`, 400, "invalid_json", "stage_id"},
		{"stage out of range", map[string]any{"stage_id": 7, "stage_input": p1}, 400, "bad_request", "stage 7 is not on the route"},
		{"negative stage", map[string]any{"stage_id": -1, "stage_input": p1}, 400, "bad_request", "stage -1 is not on the route"},
		{"stage 0 given a string", map[string]any{"stage_id": 0, "stage_input": p1}, 400, "bad_request", "stage 0 takes a prompt object"},
		{"stage 0 given an array", map[string]any{"stage_id": 0, "stage_input": []string{"a"}}, 400, "bad_request", "not a JSON array"},
		{"stage 0 no input", map[string]any{"stage_id": 0}, 400, "bad_request", "stage_input is missing"},
		{"stage 0 empty text", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": ""}}, 400, "bad_request", "text is empty"},
		{"stage 0 empty prompt", map[string]any{"stage_id": 0, "stage_input": map[string]any{"prompt": ""}}, 400, "bad_request", "text is empty"},
		{"stage 0 text and prompt", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a", "prompt": "b"}}, 400, "bad_request", "both text and prompt"},
		{"stage 0 text number", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": 3}}, 400, "bad_request", "stage_input"},
		{"stage 0 prompt extra field", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a", "voice": "x"}}, 400, "bad_request", `unknown field "voice"`},
		{"stage 0 bad modality", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a"}, "output_modalities": []string{"smell"}}, 400, "bad_request", "smell"},
		{"stage 0 params short", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a"}, "output_modalities": []string{"timestamps"}, "sampling_params": []any{nil, nil}}, 400, "bad_request", "needs at least 3"},
		{"stage 0 params not objects", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a"}, "sampling_params": []any{1, 2}}, 400, "bad_request", "sampling_params[0]"},
		{"stage 0 bad later-stage params", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a"}, "sampling_params": []any{nil, map[string]any{"gain": 2}}}, 400, "bad_request", `sampling_params[1]: stage 1 (vocoder): invalid sampling params: gain: unknown field; this stage takes no sampling params`},
		{"stage 0 bad voice", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a"}, "sampling_params": []any{map[string]any{"voice": "zz"}, nil}}, 400, "bad_request", "zz"},
		{"stage 1 given an object", map[string]any{"stage_id": 1, "stage_input": map[string]any{"text": "a"}}, 400, "bad_request", "stage 1 takes the opaque stage_input string"},
		{"stage 1 given a number", map[string]any{"stage_id": 1, "stage_input": 5}, 400, "bad_request", "not a JSON number"},
		{"stage 1 no input", map[string]any{"stage_id": 1}, 400, "bad_request", "stage_input is missing"},
		{"stage 1 null input", `{"stage_id": 1, "stage_input": null}`, 400, "bad_request", "stage_input is missing"},
		{"stage 1 with another request_id", map[string]any{"stage_id": 1, "stage_input": p1, "request_id": "r"}, 400, "bad_request", `request_id "r" is not the payload's`},
		{"stage 1 with sampling_params", map[string]any{"stage_id": 1, "stage_input": p1, "sampling_params": []any{}}, 400, "bad_request", "travel inside the payload"},
		{"a finished answer posted back", map[string]any{"stage_id": 1, "stage_input": p1, "finished": true}, 400, "bad_request", "this answer is finished"},
		{"stage 1 with params", map[string]any{"stage_id": 1, "stage_input": p1, "sampling_params": []any{nil}}, 400, "bad_request", "travel inside the payload"},
		{"not base64", map[string]any{"stage_id": 1, "stage_input": "not base64!"}, 400, payload.CodeNotBase64, "not URL-safe base64"},
		{"padded base64", map[string]any{"stage_id": 1, "stage_input": p1 + "="}, 400, payload.CodeNotBase64, "base64"},
		{"not a payload", map[string]any{"stage_id": 1, "stage_input": base64.RawURLEncoding.EncodeToString([]byte("hello, world"))}, 400, payload.CodeBadMagic, "not an omnistage payload"},
		{"empty string", map[string]any{"stage_id": 1, "stage_input": ""}, 400, payload.CodeBadMagic, "not an omnistage payload"},
		{"other version", map[string]any{"stage_id": 1, "stage_input": reencode(t, p1, func(b []byte) []byte { b[4] = 9; return b })}, 400, payload.CodeUnsupportedVersion, "format version 9"},
		{"truncated", map[string]any{"stage_id": 1, "stage_input": reencode(t, p1, func(b []byte) []byte { return b[:len(b)/2] })}, 400, payload.CodeUndecodable, "payload"},
		{"trailing bytes", map[string]any{"stage_id": 1, "stage_input": reencode(t, p1, func(b []byte) []byte { return append(b, 0xc0) })}, 400, payload.CodeUndecodable, "payload does not decode"},
		{"wrong stage", map[string]any{"stage_id": 2, "stage_input": p1}, 400, payload.CodeWrongStage, "payload is for stage 1"},
		{"other pipeline", map[string]any{"stage_id": 1, "stage_input": otherP1}, 400, payload.CodeWrongPipeline, `payload is for pipeline "other"`},
		{"changed pipeline", map[string]any{"stage_id": 1, "stage_input": changedP1}, 400, payload.CodeWrongPipeline, "another configuration"},
		{"skipped upstream", map[string]any{"stage_id": 2, "stage_input": skipFrom}, 400, payload.CodeOutOfRange, "comes from stage 0, but stage 2 takes its input from stage 1"},
		{"final mismatch", map[string]any{"stage_id": 2, "stage_input": wrongFinal}, 400, payload.CodeOutOfRange, "final stage is 1"},
		{"past the final stage", map[string]any{"stage_id": 2, "stage_input": pastFinal}, 400, payload.CodeOutOfRange, "does not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/run", tc.body)
			wantError(t, resp, body, tc.status, tc.code, tc.msg)
		})
	}
	// Nothing ran for any of them: only the three stage-0 calls and no
	// stage failures.
	if m := f.metricsText(); strings.Contains(m, `outcome="stage_failed"`) || !strings.Contains(m, `omnistage_requests_total{outcome="ok"} 1`) {
		t.Errorf("requests ran:\n%s", grepLines(m, "omnistage_requests_total"))
	}
}

func TestRunSigned(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{Codec: payload.NewCodec(key)}})
	forger := newFixture(t, setup{yaml: speechYAML, opts: Options{Codec: payload.NewCodec([]byte("another key, just as long as it"))}})
	unsigned := newFixture(t, setup{yaml: speechYAML})

	answers := runChain(t, func(int) *fixture { return f }, map[string]any{
		"stage_input": map[string]any{"text": "signed all the way"}, "output_modalities": []string{"audio", "timestamps"},
	})
	if len(answers) != 3 || !strings.HasPrefix(answers[0].StageInput, "T1NURwMB") {
		t.Fatalf("answers %+v", answers)
	}
	p1 := answers[0].StageInput
	for _, tc := range []struct {
		name, input, code, msg string
	}{
		{"tampered body", flip(p1, len(p1)/2), payload.CodeSignatureInvalid, "altered"},
		{"tampered tag", flip(p1, len(p1)-3), payload.CodeSignatureInvalid, "signature does not match"},
		{"tampered header", reencode(t, p1, func(b []byte) []byte { b[5] = 0; return b }), payload.CodeSignatureMissing, "not signed"},
		{"forged", stage0(t, forger, "audio", "timestamps").StageInput, payload.CodeKeyUnknown, "which this server does not hold"},
		{"forged under the server's key id", reencode(t, stage0(t, forger, "audio", "timestamps").StageInput, func(b []byte) []byte {
			reencode(t, p1, func(signed []byte) []byte { copy(b[6:14], signed[6:14]); return signed })
			return b
		}), payload.CodeSignatureInvalid, "another key"},
		{"unsigned", stage0(t, unsigned, "audio", "timestamps").StageInput, payload.CodeSignatureMissing, "only accepts signed payloads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 1, "stage_input": tc.input})
			wantError(t, resp, body, 400, tc.code, tc.msg)
		})
	}
}

// TestRunExpired checks, with an injected clock, that a stage server with
// a payload lifetime refuses a payload issued too long ago or too far in
// the future with a 400 whose code and message say which.
func TestRunExpired(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var offset atomic.Int64 // the server's clock: start + offset
	clock := func() time.Time { return start.Add(time.Duration(offset.Load())) }
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{Codec: payload.NewCodec(key, payload.WithLifetime(time.Minute), payload.WithClock(clock))}})
	p1 := stage0(t, f, "audio", "timestamps").StageInput // issued at start
	for _, tc := range []struct {
		name       string
		at         time.Duration
		code, msg  string
		wantStatus int
	}{
		{"expired", time.Minute + time.Second, payload.CodeExpired, "payload was issued 1m1s ago, longer than this server's payload lifetime of 1m0s", 400},
		{"from the future", -time.Minute, payload.CodeFromFuture, "payload was issued 1m0s in the future by this server's clock", 400},
		{"within the lifetime", time.Minute, "", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offset.Store(int64(tc.at))
			resp, body := f.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 1, "stage_input": p1})
			if tc.wantStatus == 200 {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				return
			}
			wantError(t, resp, body, tc.wantStatus, tc.code, tc.msg)
		})
	}
}

func TestRunBodyLimit(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{MaxRunBody: 1000, MaxBody: 100}})
	big := strings.Repeat("A", 2000)
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 1, "stage_input": big})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge, "body_too_large", "limit of 1000 bytes")
	resp, body = f.do(context.Background(), http.MethodPost, "/v1/generate", map[string]any{"input": big[:200]})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge, "body_too_large", "limit of 100 bytes")
	resp, body = f.do(context.Background(), http.MethodPost, "/v1/audio/speech", map[string]any{"model": "tts-1", "input": big[:200]})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge, "body_too_large", "limit of 100 bytes")

	// A payload over the codec's own limit is a 413 too.
	small := newFixture(t, setup{yaml: speechYAML, opts: Options{Codec: payload.NewCodec(nil, payload.WithMaxSize(64))}})
	resp, body = small.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "a sentence long enough to make frames"}})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge, payload.CodeTooLarge, "limit")
}

// FuzzRun posts arbitrary bodies to /v1/run: whatever comes in, the answer
// is never a 5xx and nothing panics.
func FuzzRun(f *testing.F) {
	fx := newFixture(f, setup{yaml: speechYAML})
	h := fx.srv.Handler()
	post := func(body []byte) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://localhost/v1/run", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := post([]byte(`{"stage_id":0,"stage_input":{"text":"seed words"},"output_modalities":["audio","timestamps"]}`))
	var ans hop.RunResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || ans.StageInput == "" {
		f.Fatalf("seed: %d %s", rec.Code, rec.Body)
	}
	f.Add([]byte(`{"stage_id":0,"stage_input":{"text":"hello"}}`))
	f.Add([]byte(fmt.Sprintf(`{"stage_id":1,"stage_input":%q}`, ans.StageInput)))
	f.Add([]byte(fmt.Sprintf(`{"stage_id":2,"stage_input":%q}`, ans.StageInput)))
	f.Add([]byte(`{"stage_id":1,"stage_input":"T1NURwEA"}`))
	f.Add([]byte(`{"stage_id":0,"stage_input":{"text":"x"},"sampling_params":[{},null,{"a":1}],"output_modalities":["timestamps"]}`))
	f.Add([]byte(`{"stage_id":1e400}`))
	f.Add([]byte(`{"stage_id":0,"stage_input":"\u0000"}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		start := time.Now()
		rec := post(body)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("body %q took %v", body, d)
		}
		if rec.Code >= 500 {
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}
		var e apijson.ErrorBody
		if rec.Code != 200 && (json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Message == "") {
			t.Fatalf("body %q: %d answer %s is not an OpenAI error", body, rec.Code, rec.Body)
		}
	})
}

// TestRunHopIdentity posts the same stage 1 payload twice at once to a
// headless stage server, as a coordinator that retried a hop would: both
// run (no 409), GET /v1/requests/{id} sees them, and one DELETE of the
// request's id aborts both and leaves the server idle. Posted again, both
// finish with the same answer.
func TestRunHopIdentity(t *testing.T) {
	hold := newGate()
	var calls atomic.Int32
	fakes := &fakeHooks{chunk: func(ctx context.Context, name string, n int) error {
		if name != "test-synth" {
			return nil
		}
		calls.Add(1)
		return hold.wait(ctx)
	}}
	one := 1
	f := newFixture(t, setup{yaml: speechYAML, fakes: fakes, opts: Options{Stage: &one}})
	entry := newFixture(t, setup{yaml: speechYAML})
	first := stage0(t, entry, "audio")
	body := map[string]any{"stage_id": 1, "stage_input": first.StageInput}
	id := first.RequestID

	type answer struct {
		status int
		body   []byte
	}
	post := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			resp, data := f.do(context.Background(), http.MethodPost, "/v1/run", body)
			ch <- answer{resp.StatusCode, data}
		}()
		return ch
	}
	a, b := post(), post()
	testkit.Eventually(t, "both hops to run", func() bool { return calls.Load() == 2 })
	resp, data := f.do(context.Background(), http.MethodGet, "/v1/requests/"+id, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"state":"active"`) {
		t.Fatalf("GET /v1/requests/%s: %d %s", id, resp.StatusCode, data)
	}
	resp, data = f.do(context.Background(), http.MethodDelete, "/v1/requests/"+id, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, data)
	}
	for _, ch := range []<-chan answer{a, b} {
		if ans := <-ch; ans.status != 499 || !strings.Contains(string(ans.body), `"code":"aborted"`) {
			t.Errorf("an aborted hop answered %d %s", ans.status, ans.body)
		}
	}
	if st := f.orch.Stats(); st.InFlight != 0 || st.Bindings() != 0 {
		t.Errorf("after the abort: %+v", st)
	}

	hold.open()
	a, b = post(), post()
	x, y := <-a, <-b
	if x.status != 200 || y.status != 200 || !bytes.Equal(x.body, y.body) {
		t.Errorf("the same hop twice: %d %.200s / %d %.200s", x.status, x.body, y.status, y.body)
	}
}

// TestRunAnswerPostedBack checks that each non-final /v1/run answer can be
// posted to the next step unchanged, as routers that chain steps by
// posting each response to the next (KServe InferenceGraph's Sequence) do.
func TestRunAnswerPostedBack(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": hello}, "output_modalities": []string{"audio"}, "request_id": "chain-1"})
	for range 5 {
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		var ans hop.RunResponse
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatal(err)
		}
		if ans.Finished {
			if ans.RequestID != "chain-1" || ans.Output == nil || ans.Output.Audio == nil {
				t.Fatalf("final answer %s", body)
			}
			return
		}
		resp, body = f.do(context.Background(), http.MethodPost, "/v1/run", json.RawMessage(body))
	}
	t.Fatal("the chain did not finish")
}

// TestRunPromptShape checks that stage 0 takes vLLM-Omni's stage_input
// shape, {"prompt": ...}, as it takes {"text": ...}: the same answer.
func TestRunPromptShape(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	var byText, byPrompt hop.RunResponse
	f.post("/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "Same words."}, "request_id": "a"}, &byText)
	f.post("/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"prompt": "Same words."}, "request_id": "b"}, &byPrompt)
	if byText.StageID != 1 || byPrompt.StageID != 1 || byText.Finished || byPrompt.Finished {
		t.Fatalf("answers %+v and %+v", byText, byPrompt)
	}
	decode := func(s string) *payload.Envelope {
		env, err := payload.NewCodec(nil).Decode(s, payload.Expect{Pipeline: f.srv.def.cfg.Pipeline.Name, Digest: f.srv.def.cfg.Digest(), Stage: 1, NumStages: f.srv.def.cfg.Route.NumIDs()})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	a, b := decode(byText.StageInput), decode(byPrompt.StageInput)
	if a.Prompt != b.Prompt || !reflect.DeepEqual(a.Data, b.Data) {
		t.Errorf("the prompt shape gave another payload: %+v vs %+v", b.Prompt, a.Prompt)
	}
}
