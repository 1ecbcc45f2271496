package stageserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/payload"
)

// testExpect is what the payloads of these tests are for.
var testExpect = payload.Expect{Pipeline: "p", Digest: [32]byte{1}, Stage: 1, NumStages: 2}

// testPayload returns the stage_input string of an envelope for stage 1
// carrying n audio samples, from codec.
func testPayload(t testing.TB, codec *payload.Codec, n int) (string, *payload.Envelope) {
	t.Helper()
	samples := make([]int16, n)
	for i := range samples {
		samples[i] = int16(i * 7)
	}
	e := &payload.Envelope{Version: payload.FormatVersion, Pipeline: "p", Digest: [32]byte{1}, TransferID: "t", RequestID: "r",
		From: 0, To: 1, Final: 1, Params: make([]json.RawMessage, 2), Outputs: []string{"audio"},
		Data: []engine.Chunk{{Audio: &engine.Audio{SampleRate: 16000, Samples: samples}}}}
	s, err := codec.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// bodyServer returns a Server with what readRun needs: codec, a budget of
// budget bytes, and MaxBody.
func bodyServer(codec *payload.Codec, budget int64) *Server {
	return &Server{codec: codec,
		opts:   ServerOptions{MaxBody: 64 << 20, BodyReadTimeout: time.Minute},
		bodies: membudget.New(budget, 10*time.Millisecond, nil)}
}

// read is one readRun of a body: what it gave, what the budget held at its
// end, the bytes allocated meanwhile, and the release to call once done
// with the body.
type read struct {
	body    *runBody
	err     error
	held    int64
	alloc   uint64
	release func()
}

// readBody reads body as s's one-shot body, arriving in parts of at most
// part bytes, its length declared unless chunked.
func readBody(s *Server, body []byte, part int, chunked bool) read {
	r := httptest.NewRequest(http.MethodPost, hop.Path, &parts{b: body, n: part})
	r.ContentLength = int64(len(body))
	if chunked {
		r.ContentLength = -1
	}
	w := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, release, err := s.readRun(w, r)
	runtime.ReadMemStats(&after)
	return read{body: b, err: err, held: s.bodies.Held(), alloc: after.TotalAlloc - before.TotalAlloc, release: release}
}

// parts is a body that arrives n bytes at a time.
type parts struct {
	b []byte
	n int
}

func (p *parts) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	k := copy(b[:min(len(b), p.n)], p.b)
	p.b = p.b[k:]
	return k, nil
}

// decoded returns what the stage_input of a request read gives: its
// envelope, or the code of the error.
func decoded(codec *payload.Codec, b *runBody) (*payload.Envelope, string) {
	in := bytes.TrimSpace(b.req.StageInput)
	if len(in) == 0 || in[0] != '"' {
		return nil, "not a string"
	}
	e, err := b.decode(codec, in, testExpect)
	if err == nil {
		return e, ""
	}
	var pe *payload.Error
	if errors.As(err, &pe) {
		return nil, pe.Code
	}
	return nil, "other: " + err.Error()
}

// sameRead checks that readRun, with body arriving in parts of at most
// part bytes, and the strict decoder of the whole body agree: both fail,
// or both give the same request whose stage_input decodes alike, or
// readRun took out a stage_input string that holds what JSON refuses (a
// raw control character) and the codec refuses it too, as what it finds
// wrong first (perhaps the payload's header, before the character).
func sameRead(t *testing.T, codec *payload.Codec, body string, part int) {
	t.Helper()
	var slow hop.RunRequest
	serr := httperr.UnmarshalJSON([]byte(body), &slow)
	for _, chunked := range []bool{false, true} {
		got := readBody(bodyServer(codec, 1<<30), []byte(body), part, chunked)
		defer got.release()
		if got.err != nil {
			if serr == nil {
				t.Fatalf("body %.200q (parts of %d, chunked %v): readRun: %v; the decoder took it", body, part, chunked, got.err)
			}
			continue
		}
		fastEnv, fastCode := decoded(codec, got.body)
		if serr != nil {
			if !strings.HasPrefix(fastCode, "payload_") {
				t.Fatalf("body %.200q: readRun took it (its stage_input gives %q); the decoder: %v", body, fastCode, serr)
			}
			continue
		}
		slowEnv, slowCode := decoded(codec, &runBody{req: slow})
		fast, want := got.body.req, slow
		fast.StageInput, want.StageInput = nil, nil
		if !reflect.DeepEqual(fast, want) || fastCode != slowCode || !reflect.DeepEqual(fastEnv, slowEnv) {
			t.Fatalf("body %.100q…%q (parts of %d, chunked %v): readRun %+v %q, the decoder %+v %q", body, body[max(len(body)-60, 0):], part, chunked, fast, fastCode, want, slowCode)
		}
	}
}

func TestReadRunMatchesDecoder(t *testing.T) {
	codec := payload.NewCodec(nil)
	good, _ := testPayload(t, codec, 3000)
	esc := `\u00` + strings.ToUpper(string(good[40]))
	for _, body := range []string{
		`{"stage_id":1,"stage_input":"` + good + `"}`,
		`{"stage_input":"` + good + `","stage_id":1}`,
		` { "stage_id" : 1 ,` + "\n\t" + `"stage_input":"` + good + `"} `,
		`{"stage_id":1,"stage_input":"` + good + `","stage_input":"other"}`,
		`{"stage_id":1,"stage_input":"other","stage_input":"` + good + `"}`,
		`{"stage_id":1,"stage_input":"` + good + `","stage_input":{"text":"x"}}`,
		`{"stage_id":1,"stage_input":"` + good + `","stage_input":"~stage_input~"}`,
		`{"stage_id":1,"stage_input":"` + good + `"`,
		`{"stage_id":1,"stage_input":"` + good,
		`{"stage_id":1,"stage_input":"` + good + `"}}`,
		`{"stage_id":1,"stage_input":"` + good + `"} {}`,
		`{"stage_id":1,"stage_input":"` + good + `","x":1}`,
		`{"request_id":"a,\"stage_input\":\"` + good + `\"","stage_id":0,"stage_input":{"text":"hi"}}`,
		`{"request_id":"{","stage_input":"` + good + `","stage_id":1}`,
		`{"request_id":"a, "stage_input":"` + good + `"}`,
		`["stage_input":"` + good + `"]`,
		`{"stage_id":1,"stage_input":"` + good[:40] + esc + good[41:] + `"}`,
		`{"stage_id":1,"stage_input":"` + good[:40] + `\/` + good[41:] + `"}`,
		`{"stage_id":1,"stage_input":"` + good[:40] + `\x` + good[41:] + `"}`,
		`{"stage_id":1,"stage_input":"` + good[:40] + `\ud83d\ude00` + good[41:] + `"}`,
		`{"stage_id":1,"stage_input":"` + good[:40] + "\x01" + good[41:] + `"}`,
		`{"stage_id":1,"stage_input":"` + good + `\"}`,
		`{"stage_id":1,"stage_input":"~stage_input~"}`,
		`{"stage_id":1,"stage_input":"` + good[:3] + `"}`,
		`{"stage_id":1,"stage_input":""}`,
		`{"stage_id":1,"stage_input":` + good + `}`,
		`{"stage_id":0,"stage_input":{"text":"\"stage_input\":\"` + good + `\""}}`,
		`{"stage_id":1,` + strings.Repeat(" ", bodyHead) + `"stage_input":"` + good + `"}`,
		`{"stage_id":1,"stage_input":"` + strings.Repeat("A", 90) + `"}`,
	} {
		for _, part := range []int{1, 7, 4096, len(body)} {
			sameRead(t, codec, body, part)
		}
	}
}

func FuzzReadRun(f *testing.F) {
	codec := payload.NewCodec(nil)
	good, _ := testPayload(f, codec, 20)
	f.Add(`{"stage_id":1,"stage_input":"`+good+`"}`, 3)
	f.Add(`{"request_id":"{","stage_input":"`+good+`","stage_id":1}`, 5)
	f.Add(`{"stage_id":1,"stage_input":"`+good[:9]+`\u0041`+good[10:]+`"}`, 2)
	f.Add(`{"stage_id":0,"stage_input":{"text":"x"},"sampling_params":[null]}`, 1000)
	f.Fuzz(func(t *testing.T, body string, part int) {
		sameRead(t, codec, body, max(part%100, 1))
	})
}

// TestReadRunHolds: reading a one-shot body holds, and takes from the
// budget, about its payload's size, not its base64's, and every byte it
// allocates was taken first; chunked or not. A budget whose free part is
// too small for the payload refuses it as overloaded (503).
func TestReadRunHolds(t *testing.T) {
	codec := payload.NewCodec([]byte("a key of 32 bytes for the tests."))
	s, want := testPayload(t, codec, 2<<20) // 4 MiB of samples
	body := []byte(`{"stage_id":1,"stage_input":"` + s + `"}`)
	bin := base64.RawURLEncoding.DecodedLen(len(s))
	for _, chunked := range []bool{false, true} {
		got := readBody(bodyServer(codec, 1<<30), body, 1<<20, chunked)
		defer got.release()
		if got.err != nil {
			t.Fatal(got.err)
		}
		if env, code := decoded(codec, got.body); code != "" || !reflect.DeepEqual(env, want) {
			t.Fatalf("chunked %v: the payload read gives %q", chunked, code)
		}
		limit := int64(bin) + 1<<20
		if chunked {
			limit = 3*int64(bin) + 1<<20 // its buffer grew by doubling
		}
		t.Logf("chunked %v: a body of %d bytes (a payload of %d) held %d bytes, allocated %d", chunked, len(body), bin, got.held, got.alloc)
		if got.held < int64(bin) || got.held > limit {
			t.Errorf("chunked %v: the body held %d bytes of the budget; want its payload's %d, at most %d", chunked, got.held, bin, limit)
		}
		if got.alloc > uint64(got.held)+64<<10 {
			t.Errorf("chunked %v: reading allocated %d bytes, more than the %d taken from the budget", chunked, got.alloc, got.held)
		}
	}
	full := bodyServer(codec, 16<<20)
	other := full.bodies.Hold("others")
	if err := other.Grow(context.Background(), 14<<20); err != nil {
		t.Fatal(err)
	}
	got := readBody(full, body, 1<<20, false)
	got.release()
	var busy *membudget.BusyError
	if status, _, _ := httperr.Classify(got.err); !errors.As(got.err, &busy) || status != http.StatusServiceUnavailable {
		t.Fatalf("a payload larger than the budget left: %v, want a 503 overloaded", got.err)
	}
	other.Release()
	if full.bodies.Held() != 0 {
		t.Fatalf("a refused body left %d bytes held", full.bodies.Held())
	}
}

// TestReadRunRefusesEarly: a payload whose header the server cannot use
// (here unsigned, on a server with a key) is refused without its payload
// ever being decoded or its buffer made; a body that declares more than
// MaxBody is refused before any of it is read.
func TestReadRunRefusesEarly(t *testing.T) {
	keyed := payload.NewCodec([]byte("a key of 32 bytes for the tests."))
	unsigned, _ := testPayload(t, payload.NewCodec(nil), 8<<20)
	body := []byte(`{"stage_id":1,"stage_input":"` + unsigned + `"}`)
	got := readBody(bodyServer(keyed, 1<<30), body, 64<<10, false)
	defer got.release()
	if got.err != nil {
		t.Fatal(got.err)
	}
	if _, code := decoded(keyed, got.body); code != payload.CodeSignatureMissing {
		t.Fatalf("an unsigned payload on a keyed server: %q, want %s", code, payload.CodeSignatureMissing)
	}
	t.Logf("a body of %d bytes refused by its header: %d bytes allocated", len(body), got.alloc)
	if got.alloc > 1<<20 {
		t.Errorf("reading a body refused by its header allocated %d bytes; its payload (%d) must not be decoded", got.alloc, len(unsigned)*3/4)
	}

	s := bodyServer(keyed, 1<<30)
	r := httptest.NewRequest(http.MethodPost, hop.Path, unreadable{t})
	r.ContentLength = s.opts.MaxBody + 1
	_, release, err := s.readRun(httptest.NewRecorder(), r)
	release()
	var me *http.MaxBytesError
	if status, _, _ := httperr.Classify(err); !errors.As(err, &me) || status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body declaring more than MaxBody: %v, want a 413", err)
	}
}

// unreadable is a body that must not be read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the body was read")
	return 0, io.EOF
}
