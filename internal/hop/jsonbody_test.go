package hop

import (
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/httperr"
)

// sameDecode checks that decodeRun and the plain strict decoder agree on
// body: both fail, or both give the same request, or the fast path gives a
// stage_input string that the payload codec refuses (it holds a byte that
// is not base64url, which is also why the strict decoder failed).
func sameDecode(t *testing.T, body string) {
	t.Helper()
	var fast, slow RunRequest
	ferr := decodeRun([]byte(body), &fast)
	serr := httperr.UnmarshalJSON([]byte(body), &slow)
	if ferr == nil && serr != nil && !isBase64URL(fast.StageInput) {
		return
	}
	if (ferr == nil) != (serr == nil) {
		t.Fatalf("body %q: fast path error %v, decoder error %v", body, ferr, serr)
	}
	if ferr == nil && !reflect.DeepEqual(normal(fast), normal(slow)) {
		t.Fatalf("body %q: fast path %+v, decoder %+v", body, fast, slow)
	}
}

// isBase64URL reports whether a JSON string holds only base64url.
func isBase64URL(s []byte) bool {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return false
	}
	for _, c := range s[1 : len(s)-1] {
		if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", rune(c)) {
			return false
		}
	}
	return true
}

// normal makes requests comparable: RawMessage nil and empty alike.
func normal(r RunRequest) RunRequest {
	if len(r.StageInput) == 0 {
		r.StageInput = nil
	}
	return r
}

func TestDecodeRunFastPath(t *testing.T) {
	defer func(n int) { fastInputMin = n }(fastInputMin)
	fastInputMin = 4
	long := strings.Repeat("AbC-_9", 4)
	for _, body := range []string{
		`{"stage_id":1,"stage_input":"` + long + `"}`,
		`{"stage_input":"` + long + `","stage_id":2}`,
		` { "stage_id" : 1 ,` + "\n\t" + `"stage_input":"` + long + `"} `,
		`{"stage_id":1,"stage_input":"` + long + `","stage_input":"other"}`,
		`{"stage_id":1,"stage_input":"other","stage_input":"` + long + `"}`,
		`{"stage_id":1,"stage_input":"` + long + `","stage_input":{"text":"x"}}`,
		`{"stage_id":1,"stage_input":"` + long + `"`,
		`{"stage_id":1,"stage_input":"` + long + `"}}`,
		`{"stage_id":1,"stage_input":"` + long + `"} {}`,
		`{"stage_id":1,"stage_input":"` + long + `","x":1}`,
		`{"request_id":"a,\"stage_input\":\"` + long + `\"","stage_id":0,"stage_input":{"text":"hi"}}`,
		`{"request_id":"{","stage_input":"` + long + `","stage_id":1}`,
		`{"request_id":"a, "stage_input":"` + long + `"}`,
		`["stage_input":"` + long + `"]`,
		`{"stage_id":1,"stage_input":"` + long + `\u0041"}`,
		`{"stage_id":1,"stage_input":"~stage_input~"}`,
		`{"stage_id":1,"stage_input":"` + long[:3] + `"}`,
		`{"stage_id":1,"stage_input":` + long + `}`,
		`{"stage_id":0,"stage_input":{"text":"\"stage_input\":\"` + long + `\""}}`,
	} {
		sameDecode(t, body)
	}
}

func FuzzDecodeRun(f *testing.F) {
	long := strings.Repeat("AbC-_9", 4)
	f.Add(`{"stage_id":1,"stage_input":"` + long + `"}`)
	f.Add(`{"request_id":"{","stage_input":"` + long + `","stage_id":1}`)
	f.Add(`{"stage_id":0,"stage_input":{"text":"x"},"sampling_params":[null]}`)
	f.Fuzz(func(t *testing.T, body string) {
		defer func(n int) { fastInputMin = n }(fastInputMin)
		fastInputMin = 1
		sameDecode(t, body)
		// The stand-in never leaks into a decoded request.
		var r RunRequest
		if decodeRun([]byte(body), &r) == nil && string(r.StageInput) == inputStandIn && !strings.Contains(body, inputStandIn) {
			t.Fatalf("stand-in leaked for %q", body)
		}
	})
}
