package loadgen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/testkit"
)

// toneYAML is a speech pipeline of test engines: stage 0 splits the text
// into words, stage 1 speaks each as a tone.
const toneYAML = `
pipeline:
  name: tone
  input: text
  stages:
    - {id: 0, name: a,    engine: test-a,    input: text, output: text}
    - {id: 1, name: tone, engine: test-tone, input: text, output: audio, final_output: true}
deploy:
  stages:
    - {id: 0, max_inflight: 16, options: {split: true}}
    - {id: 1, max_inflight: 16}
`

// startToneServer runs the API over the tone pipeline, its metrics on
// /metrics.
func startToneServer(t *testing.T) *apitest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	engines := &engine.Registry{}
	testengine.Register(engines, nil, "test-a")
	testengine.RegisterTone(engines, "test-tone")
	return apitest.Start(t, testkit.Parse(t, toneYAML), orchestrator.Options{Registry: engines, Registerer: reg}, api.Options{Registry: reg})
}

// toneSamples is what the tone pipeline makes of text.
func toneSamples(text string) int {
	n := 0
	for _, w := range strings.Fields(text) {
		n += testengine.ToneSamples(w + "|a")
	}
	return n
}

// TestDefaultModel: without --model, the load goes to the pipeline the
// model aliases (tts-1, ...) stand for (the server's default), else to
// the first that takes text, never to an image pipeline listed before it.
func TestDefaultModel(t *testing.T) {
	text, image := "text", "image"
	for _, tc := range []struct {
		name   string
		models []apijson.Model
		want   string
	}{
		{"the built-ins", []apijson.Model{{ID: "ocr", Input: image}, {ID: "read-aloud", Input: image}, {ID: "tts", Input: text}, {ID: "tts-24k", Input: text}, {ID: "tts-1", AliasOf: "tts"}}, "tts"},
		{"another default", []apijson.Model{{ID: "a", Input: text}, {ID: "b", Input: text}, {ID: "tts-1", AliasOf: "b"}}, "b"},
		{"an image default", []apijson.Model{{ID: "ocr", Input: image}, {ID: "tts", Input: text}, {ID: "tts-1", AliasOf: "ocr"}}, "tts"},
		{"no alias", []apijson.Model{{ID: "ocr", Input: image}, {ID: "speak", Input: text}}, "speak"},
		{"an older server", []apijson.Model{{ID: "tone"}}, "tone"},
		{"images only", []apijson.Model{{ID: "ocr", Input: image}}, ""},
	} {
		if got := defaultModel(tc.models); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHTTPDriver(t *testing.T) {
	srv := startToneServer(t)
	ctx := context.Background()
	d, err := NewHTTP(srv.URL, HTTPOptions{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Prepare(ctx, testkit.Timeout); err != nil {
		t.Fatal(err)
	}
	if d.Model() != "tone" {
		t.Errorf("model %q, want the pipeline's name", d.Model())
	}

	const text = "one two three"
	st, err := d.Start(ctx, "r1", text)
	if err != nil {
		t.Fatal(err)
	}
	samples := 0
	for {
		n, rate, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rate != testengine.ToneRate {
			t.Fatalf("rate %d", rate)
		}
		samples += n
	}
	st.Close()
	if want := toneSamples(text); samples != want {
		t.Errorf("%d samples, want %d", samples, want)
	}

	if err := d.Abort(ctx, "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DELETE of an ended request: %v", err)
	}
	if held, err := d.Held(ctx, "r1"); held || err != nil {
		t.Errorf("Held of an ended request: %v, %v", held, err)
	}
	if l, err := d.Leaks(ctx); err != nil || !l.zero() || len(l.ByStage) != 2 {
		t.Errorf("Leaks at rest: %+v, %v", l, err)
	}

	bad, err := NewHTTP(srv.URL, HTTPOptions{Model: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	var e *Error
	if _, err := bad.Start(ctx, "r2", text); !errors.As(err, &e) || e.Code != "model_not_found" {
		t.Errorf("a request for an unknown model: %v", err)
	}
}

func TestNewHTTPRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8080", "ftp://h", "http://", "http://h/v1/audio/speech", "http://h?x=1"} {
		if _, err := NewHTTP(u, HTTPOptions{}); err == nil {
			t.Errorf("NewHTTP(%q) took it", u)
		}
	}
	if _, err := NewHTTP("http://127.0.0.1:8080/", HTTPOptions{}); err != nil {
		t.Errorf("a trailing slash: %v", err)
	}
}

// answer returns a speech answer whose body is r and whose X-Stream-Error
// trailer is trailer.
func answer(r io.Reader, trailer string) *httpStream {
	resp := &http.Response{Body: io.NopCloser(r), Trailer: http.Header{}}
	if trailer != "" {
		resp.Trailer.Set("X-Stream-Error", trailer)
	}
	return &httpStream{resp: resp, rate: 16000, buf: make([]byte, 7)}
}

func TestHTTPStreamSamples(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		body io.Reader
	}{
		// Samples split across reads still count once each.
		{"one byte a read", iotest.OneByteReader(bytes.NewReader(make([]byte, 30)))},
		// Reads of 7 bytes, odd, into the stream's buffer.
		{"odd reads", bytes.NewReader(make([]byte, 30))},
		// The last data comes with io.EOF: Next returns it first.
		{"data with EOF", iotest.DataErrReader(bytes.NewReader(make([]byte, 30)))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := answer(tc.body, "")
			total := 0
			for {
				n, _, err := s.Next(ctx)
				if errors.Is(err, io.EOF) {
					if n != 0 {
						t.Fatalf("Next returned %d samples with io.EOF", n)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			if total != 15 {
				t.Errorf("%d samples, want 15", total)
			}
			if _, _, err := s.Next(ctx); !errors.Is(err, io.EOF) {
				t.Errorf("Next after the end: %v", err)
			}
		})
	}
}

func TestHTTPStreamTrailerError(t *testing.T) {
	s := answer(bytes.NewReader(make([]byte, 4)), "replica_lost: stage 1 (vocoder): replica vocoder/0 was lost")
	ctx := context.Background()
	if n, _, err := s.Next(ctx); n != 2 || err != nil {
		t.Fatalf("Next = %d, %v", n, err)
	}
	var e *Error
	if _, _, err := s.Next(ctx); !errors.As(err, &e) || e.Code != "replica_lost" || !strings.HasPrefix(e.Msg, "stage 1") {
		t.Errorf("Next at the end of a failed stream: %v", err)
	}
}
