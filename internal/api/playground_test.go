package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/pipeline"
)

func TestPlaygroundPage(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	ctx := context.Background()
	resp, page := f.do(ctx, http.MethodGet, "/", nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q does not keep the page to its origin", csp)
	}
	// Every file the page names is served, with its type; nothing is
	// loaded from elsewhere.
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(page), -1)
	types := map[string]string{".js": "text/javascript", ".css": "text/css"}
	var assets int
	for _, m := range refs {
		ref := m[1]
		switch {
		case strings.HasPrefix(ref, "data:"), strings.HasPrefix(ref, "#"):
			continue
		case !strings.HasPrefix(ref, playgroundPrefix):
			t.Errorf("the page refers to %q, outside %s", ref, playgroundPrefix)
			continue
		}
		assets++
		resp, body := f.do(ctx, http.MethodGet, ref, nil)
		ext := ref[strings.LastIndex(ref, "."):]
		if resp.StatusCode != http.StatusOK || len(body) == 0 || !strings.HasPrefix(resp.Header.Get("Content-Type"), types[ext]) {
			t.Errorf("GET %s: %d, %s, %d bytes", ref, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		etag := resp.Header.Get("ETag")
		resp, _ = f.do(ctx, http.MethodGet, ref, nil, "If-None-Match", etag)
		if etag == "" || resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %s: %d, want 304", ref, etag, resp.StatusCode)
		}
	}
	if assets != 4 {
		t.Errorf("the page loads %d files, want its three scripts (the page's, live mode's and image mode's) and style sheet", assets)
	}
	if resp, body := f.do(ctx, http.MethodHead, "/", nil); resp.StatusCode != http.StatusOK || len(body) != 0 {
		t.Errorf("HEAD /: %d, %d bytes", resp.StatusCode, len(body))
	}
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/playground/nope.js", 404, "unknown_route"},
		{"GET", "/playground/", 404, "unknown_route"},
		{"GET", "/index.html", 404, "unknown_route"},
		{"GET", "/nope", 404, "unknown_route"},
		{"POST", "/", 405, "method_not_allowed"},
		{"POST", "/v1/pipeline", 405, "method_not_allowed"},
	} {
		resp, body := f.do(ctx, tc.method, tc.path, nil)
		wantError(t, resp, body, tc.status, tc.code, "")
	}
}

func TestPlaygroundAPIKey(t *testing.T) {
	const key = "sk-test-playground"
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{APIKey: key}})
	ctx := context.Background()
	for _, path := range []string{"/", "/playground/playground.js", "/playground/playground.css"} {
		if resp, _ := f.do(ctx, http.MethodGet, path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without the key: %d, want 200 (the page is static)", path, resp.StatusCode)
		}
	}
	resp, body := f.do(ctx, http.MethodGet, "/v1/pipeline", nil)
	wantError(t, resp, body, 401, "invalid_api_key", "missing API key")
	resp, body = f.do(ctx, http.MethodGet, "/playground/nope", nil)
	wantError(t, resp, body, 404, "unknown_route", "")
	if resp, body := f.do(ctx, http.MethodGet, "/v1/pipeline", nil, "Authorization", "Bearer "+key); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/pipeline with the key: %d %s", resp.StatusCode, body)
	}
}

func TestPlaygroundNotOnStageServer(t *testing.T) {
	stage := 1
	f := newFixture(t, setup{yaml: speechYAML, opts: Options{Stage: &stage}})
	for _, path := range []string{"/", "/playground/playground.js", "/v1/pipeline"} {
		resp, body := f.do(context.Background(), http.MethodGet, path, nil)
		wantError(t, resp, body, 404, "unknown_route", "")
	}
}

func TestPipelineEndpoint(t *testing.T) {
	f := newFixture(t, setup{yaml: speechYAML})
	resp, body := f.do(context.Background(), http.MethodGet, "/v1/pipeline", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/pipeline: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"name":  "speech",
		"route": []any{0.0, 1.0},
		"stages": []any{
			map[string]any{"id": 0.0, "name": "talker", "engine": "test-speaker", "placement": "inproc", "input": "text", "output": "frames", "skipped": false, "upstream": nil, "downstream": 1.0},
			map[string]any{"id": 1.0, "name": "vocoder", "engine": "test-synth", "placement": "inproc", "input": "frames", "output": "audio", "skipped": false, "upstream": 0.0, "downstream": 2.0},
		},
		"aligner": map[string]any{"id": 2.0, "name": "aligner", "engine": "test-align", "placement": "inproc", "input": "audio", "output": "timestamps", "skipped": false, "upstream": 1.0, "downstream": nil},
		"outputs": []any{"audio", "timestamps"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GET /v1/pipeline:\n got %s\nwant %v", body, want)
	}
}

func TestDescribePipeline(t *testing.T) {
	ref := func(id int) *int { return &id }
	stage := func(id int, name, engine, placement, in, out string, skipped bool, up, down *int) apijson.PipelineStage {
		return apijson.PipelineStage{ID: id, Name: name, Engine: engine, Placement: placement, Input: in, Output: out, Skipped: skipped, Upstream: up, Downstream: down}
	}
	aligner := func(up int) *apijson.PipelineStage {
		a := stage(3, "aligner", "test-align", "inproc", "audio", "timestamps", false, &up, nil)
		return &a
	}
	for _, tc := range []struct {
		name, yaml string
		want       apijson.PipelineInfo
	}{
		{"skipped stage", fmt.Sprintf(threeYAML, "stage_transitions: [[0, 1]]"), apijson.PipelineInfo{
			Name: "three", Route: []int{0, 1},
			Stages: []apijson.PipelineStage{
				stage(0, "talker", "test-speaker", "inproc", "text", "frames", false, nil, ref(1)),
				stage(1, "vocoder", "test-synth", "inproc", "frames", "audio", false, ref(0), ref(3)),
				stage(2, "post", "test-gain", "inproc", "audio", "audio", true, nil, nil),
			},
			Aligner: aligner(1),
			Outputs: []string{"audio", "timestamps"},
		}},
		{"route order differs from ids", reorderYAML, apijson.PipelineInfo{
			Name: "reorder", Route: []int{0, 2, 1},
			Stages: []apijson.PipelineStage{
				stage(0, "talker", "test-speaker", "inproc", "text", "frames", false, nil, ref(2)),
				stage(1, "post", "test-gain", "inproc", "audio", "audio", false, ref(2), ref(3)),
				stage(2, "vocoder", "test-synth", "inproc", "frames", "audio", false, ref(0), ref(1)),
			},
			Aligner: aligner(1),
			Outputs: []string{"audio", "timestamps"},
		}},
		{"placements, no aligner", `
pipeline:
  name: split
  input: text
  stages:
    - {id: 0, name: talker,  engine: test-speaker, input: text,   output: frames}
    - {id: 1, name: vocoder, engine: test-synth,   input: frames, output: audio, final_output: true}
deploy:
  stages:
    - {id: 1, placement: remote, endpoints: ["http://127.0.0.1:9"]}
`, apijson.PipelineInfo{
			Name: "split", Route: []int{0, 1},
			Stages: []apijson.PipelineStage{
				stage(0, "talker", "test-speaker", "inproc", "text", "frames", false, nil, ref(1)),
				stage(1, "vocoder", "test-synth", "remote", "frames", "audio", false, ref(0), nil),
			},
			Outputs: []string{"audio"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := pipeline.Parse([]byte(tc.yaml), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := apijson.DescribePipeline(cfg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
