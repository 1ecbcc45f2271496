package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/wire"
)

// fakeRunServer is a stage server of a two-stage pipeline: stage 0 passes
// the text on, stage 1 answers with a WAV file and, when asked for, word
// timestamps.
type fakeRunServer struct {
	stage int
	mu    sync.Mutex
	got   []wire.RunRequest
	auth  []string
	// refuse, when set, answers every call with this status and message.
	refuse     int
	refuseCode string
}

var fakeWAV = []byte("RIFF....WAVEfmt fake wav bytes")

var fakeWords = []engine.Word{{Word: "hello", StartMs: 0, EndMs: 300}, {Word: "world", StartMs: 300, EndMs: 700}}

func (f *fakeRunServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req wire.RunRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.refuse != 0 {
		w.WriteHeader(f.refuse)
		fmt.Fprintf(w, `{"error":{"message":"the voice \"zzz\" is unknown","type":"invalid_request_error","code":%q}}`, f.refuseCode)
		return
	}
	if f.stage == 0 {
		var p wire.Prompt
		_ = json.Unmarshal(req.StageInput, &p)
		mods, _ := json.Marshal(req.OutputModalities)
		json.NewEncoder(w).Encode(wire.RunResponse{RequestID: "r-42", StageID: 1, StageInput: p.Text + "|" + string(mods)})
		return
	}
	var in string
	_ = json.Unmarshal(req.StageInput, &in)
	out := &wire.Output{Audio: &wire.Audio{Format: "wav", SampleRate: 16000, DurationMs: 700, Data: fakeWAV}}
	if strings.Contains(in, "timestamps") {
		out.Timestamps = fakeWords
	}
	json.NewEncoder(w).Encode(wire.RunResponse{RequestID: "r-42", StageID: 1, Finished: true, Output: out})
}

func startFake(t *testing.T, f *fakeRunServer) string {
	t.Helper()
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return s.URL
}

func runWith(t *testing.T, stdin string, args ...string) (stdout []byte, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	return out.Bytes(), errb.String(), code
}

func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

func TestRunCoordinator(t *testing.T) {
	s0, s1 := &fakeRunServer{stage: 0}, &fakeRunServer{stage: 1}
	u0, u1 := startFake(t, s0), startFake(t, s1)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(t.TempDir(), "speech.wav")
	stdout, stderr, code := runWith(t, "", "run", "--stage", u0, "--stage", u1, "-o", outPath, "--timestamps",
		"--voice", "slt", "--speed", "1.5", "--api-key-file", keyFile, "--request-id", "r-42", "hello world")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// One progress line per stage: stage, URL, time, bytes out and in.
	for i, u := range []string{u0, u1} {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^stage %d  %s  \d+ms  sent \d+ B  received \d+ B  `, i, regexp.QuoteMeta(u)))
		if !re.MatchString(stderr) {
			t.Errorf("no progress line for stage %d in:\n%s", i, stderr)
		}
	}
	if !strings.Contains(stderr, "next: stage 1") || !strings.Contains(stderr, "finished") || !strings.Contains(stderr, "wrote") || !strings.Contains(stderr, outPath) {
		t.Errorf("stderr:\n%s", stderr)
	}
	data, err := os.ReadFile(outPath)
	if err != nil || !bytes.Equal(data, fakeWAV) {
		t.Fatalf("-o file = %q, %v", data, err)
	}
	var words []engine.Word
	if err := json.Unmarshal(stdout, &words); err != nil || len(words) != 2 || words[1] != fakeWords[1] {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	req := s0.got[0]
	if *req.StageID != 0 || string(req.StageInput) != `{"text":"hello world"}` || req.RequestID != "r-42" {
		t.Errorf("stage 0 request = %+v", req)
	}
	if fmt.Sprint(req.OutputModalities) != "[audio timestamps]" {
		t.Errorf("output_modalities = %v", req.OutputModalities)
	}
	if len(req.SamplingParams) != 2 || string(req.SamplingParams[0]) != `{"speed":1.5,"voice":"slt"}` || string(req.SamplingParams[1]) != "null" {
		t.Errorf("sampling_params = %s", req.SamplingParams)
	}
	if s0.auth[0] != "Bearer 0123456789abcdef0123" || s1.auth[0] != s0.auth[0] {
		t.Errorf("auth = %q, %q", s0.auth, s1.auth)
	}
	if got := s1.got[0]; got.SamplingParams != nil || got.RequestID != "" || got.OutputModalities != nil {
		t.Errorf("stage 1 got more than the payload: %+v", got)
	}
}

func TestRunCoordinatorDefaults(t *testing.T) {
	u0, u1 := startFake(t, &fakeRunServer{stage: 0}), startFake(t, &fakeRunServer{stage: 1})
	t.Chdir(t.TempDir())
	stdout, stderr, code := runWith(t, "text from stdin\n", "run", "--stage", u0, "--stage", u1, "-")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if len(stdout) != 0 {
		t.Errorf("stdout without --timestamps: %q", stdout)
	}
	if data, err := os.ReadFile("out.wav"); err != nil || !bytes.Equal(data, fakeWAV) {
		t.Fatalf("out.wav = %q, %v", data, err)
	}
	if !strings.Contains(stderr, "to out.wav") {
		t.Errorf("stderr does not say where the audio went:\n%s", stderr)
	}

	// -o - writes the WAV bytes to standard output.
	stdout, stderr, code = runWith(t, "", "run", "--stage", "0="+u0, "--stage", "1="+u1, "-o", "-", "hi")
	if code != ExitOK || !bytes.Equal(stdout, fakeWAV) {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}

func TestRunCoordinatorRetriesAnotherServer(t *testing.T) {
	s1 := &fakeRunServer{stage: 1}
	dead := closedURL(t)
	u0, u1 := startFake(t, &fakeRunServer{stage: 0}), startFake(t, s1)
	out := filepath.Join(t.TempDir(), "a.wav")
	_, stderr, code := runWith(t, "", "run", "--stage", "1="+dead+","+u1, "--stage", "0="+u0, "-o", out, "hi")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "stage 1  "+dead+"  failed after") || !strings.Contains(stderr, "trying another server") {
		t.Errorf("no retry line in:\n%s", stderr)
	}
	if len(s1.got) != 1 {
		t.Errorf("second server got %d calls", len(s1.got))
	}
}

func TestRunCoordinatorFailures(t *testing.T) {
	u0 := startFake(t, &fakeRunServer{stage: 0})
	refusing := &fakeRunServer{stage: 1, refuse: 400, refuseCode: "bad_request"}
	other := &fakeRunServer{stage: 1}
	u1, u1b := startFake(t, refusing), startFake(t, other)
	out := filepath.Join(t.TempDir(), "a.wav")

	_, stderr, code := runWith(t, "", "run", "--stage", u0, "--stage", u1+","+u1b, "-o", out, "hi")
	if code != ExitFailure {
		t.Fatalf("exit %d on a 400, want %d", code, ExitFailure)
	}
	if !strings.Contains(stderr, `stage 1 at `+u1+` refused the request (400 bad_request): the voice "zzz" is unknown`) {
		t.Errorf("stderr:\n%s", stderr)
	}
	if len(other.got) != 0 {
		t.Error("a 400 was retried on another server")
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an output file was written for a failed run")
	}

	// Every server of a stage down: exit 1 naming the stage.
	_, stderr, code = runWith(t, "", "run", "--stage", closedURL(t), "-o", out, "hi")
	if code != ExitFailure || !strings.Contains(stderr, "stage 0 at ") || !strings.Contains(stderr, "giving up") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}

	// An answer naming a stage nobody gave.
	_, stderr, code = runWith(t, "", "run", "--stage", u0, "-o", out, "hi")
	if code != ExitFailure || !strings.Contains(stderr, "no server for stage 1") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestRunCoordinatorUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no stage", []string{"run", "hi"}, "no --stage given"},
		{"no text", []string{"run", "--stage", "http://127.0.0.1:1"}, "no text given"},
		{"empty text", []string{"run", "--stage", "http://127.0.0.1:1", "  "}, "empty"},
		{"bad url", []string{"run", "--stage", "127.0.0.1:8101", "hi"}, `"127.0.0.1:8101" is not an http:// or https:// URL`},
		{"empty url in list", []string{"run", "--stage", "http://a:1,", "hi"}, "empty URL"},
		{"duplicate stage", []string{"run", "--stage", "http://a:1", "--stage", "0=http://b:1", "hi"}, "stage 0 is given twice"},
		{"no stage 0", []string{"run", "--stage", "1=http://a:1", "hi"}, "no server for stage 0"},
		{"stdout twice", []string{"run", "--stage", "http://a:1", "-o", "-", "--timestamps", "hi"}, "both write to standard output"},
		{"unknown flag", []string{"run", "--nope", "hi"}, "flag provided but not defined"},
		{"missing key file", []string{"run", "--stage", "http://a:1", "--api-key-file", "/nonexistent/key", "hi"}, "--api-key-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runWith(t, "", tc.args...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant %q", code, stderr, tc.want)
			}
		})
	}
	_, stderr, code := runWith(t, "", "run", "-h")
	if code != ExitOK || !strings.Contains(stderr, "ID=URL[,URL...]") {
		t.Errorf("-h: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestParseStageFlags(t *testing.T) {
	got, n, err := parseStageFlags([]string{"http://a:1", "2=http://c:1,https://d:2/", "http://e:1", "1=http://b:1?x=1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{0: {"http://a:1"}, 1: {"http://b:1?x=1"}, 2: {"http://c:1", "https://d:2/"}, 3: {"http://e:1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || n != 4 {
		t.Fatalf("got %v (%d ids), want %v (4)", got, n, want)
	}
}
