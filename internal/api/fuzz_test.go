package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/httperr"
)

// fuzzPaths are the endpoints whose JSON bodies FuzzRequestBodies posts.
var fuzzPaths = []string{"/v1/audio/speech", "/v1/generate", "/v1/audio/captions"}

// FuzzRequestBodies posts arbitrary JSON bodies to the endpoints of
// fuzzPaths on the fake speech pipeline. Whatever comes in, nothing panics
// (a handler's panic would be a 500), and every refusal is a 4xx in the
// OpenAI error shape with a code: a status, or an error event in a stream
// that began, never a server_error. It starts from the bodies of the
// refusal tables, each sent to every endpoint.
func FuzzRequestBodies(f *testing.F) {
	fx := newFixture(f, setup{yaml: speechYAML})
	h := fx.srv.Handler()
	var seeds []any
	for _, r := range slices.Concat(speechRefusals, generateRefusals) {
		seeds = append(seeds, r.body)
	}
	for _, rc := range requestChecks {
		seeds = append(seeds, requestCheckBodies(rc.mods, rc.params)["/v1/generate"])
	}
	for _, s := range seeds {
		body, ok := s.(string)
		if !ok {
			b, err := json.Marshal(s)
			if err != nil {
				f.Fatal(err)
			}
			body = string(b)
		}
		for i := range fuzzPaths {
			f.Add(uint8(i), []byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		path := fuzzPaths[int(endpoint)%len(fuzzPaths)]
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://localhost"+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code >= 200 && rec.Code < 300 {
			// A stream that began may end with an error event; it must
			// be the caller's error too.
			if bytes.Contains(rec.Body.Bytes(), []byte(`"type":"`+httperr.TypeServer+`"`)) {
				t.Fatalf("POST %s %q: %d with a server error in its stream: %s", path, body, rec.Code, rec.Body)
			}
			return
		}
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		var e apijson.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Code == "" || e.Error.Type != httperr.TypeInvalidRequest {
			t.Fatalf("POST %s %q: %d answer %s is not a classified OpenAI error: %v", path, body, rec.Code, rec.Body, err)
		}
	})
}
