package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
)

// apiKey is the stage servers' API key.
const apiKey = "0123456789abcdef0123"

// startStageServers starts headless stage servers of the built-in tts
// pipeline over the real engines (talker, vocoder, aligner), with an API
// key, for the length of the test.
func startStageServers(t *testing.T) ([]string, *pipeline.Config) {
	t.Helper()
	cfg, err := pipeline.Builtin("tts")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for id := range 3 {
		stage := id
		s := apitest.Start(t, cfg, orchestrator.Options{Registry: shipped.Registry()}, api.Options{Stage: &stage, APIKey: apiKey})
		urls = append(urls, s.URL)
	}
	return urls, cfg
}

// keyFile writes the API key to a file and returns its path.
func keyFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte(apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func runWith(t *testing.T, stdin string, args ...string) (stdout []byte, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, args)
	return out.Bytes(), errb.String(), code
}

// said is what omnistage say makes of text with args: the reference the
// chain of stage servers must match.
func said(t *testing.T, text string, args ...string) (*engine.Audio, []engine.Word) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "say.wav")
	stdout, stderr, code := runWith(t, "", append(append([]string{"say", "--timestamps", "-o", out}, args...), text)...)
	if code != ExitOK {
		t.Fatalf("say: exit %d:\n%s", code, stderr)
	}
	a := readWAVFile(t, out)
	var words []engine.Word
	if err := json.Unmarshal(stdout, &words); err != nil {
		t.Fatalf("say's timestamps %q: %v", stdout, err)
	}
	return a, words
}

func readWAVFile(t *testing.T, path string) *engine.Audio {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := audio.ReadWAV(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if want := audio.WAVHeader(a.SampleRate, uint32(2*len(a.Samples))); !bytes.Equal(data[:audio.WAVHeaderLen], want) {
		t.Errorf("%s: the header's sizes are not the file's", path)
	}
	return a
}

func TestRunCoordinator(t *testing.T) {
	urls, _ := startStageServers(t)
	const text = "Hello world. The chain streams each sentence."
	wantAudio, wantWords := said(t, text, "--voice", "rms", "--speed", "1.5")
	outPath := filepath.Join(t.TempDir(), "speech.wav")
	stdout, stderr, code := runWith(t, "", "run", "--stage", urls[0], "--stage", urls[1], "--stage", urls[2], "-o", outPath, "--timestamps",
		"--voice", "rms", "--speed", "1.5", "--api-key-file", keyFile(t), "--request-id", "r-42", text)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	// One progress line per stage: stage, URL, time to the first chunk,
	// time to the end, chunks, bytes, and where the answer went.
	for i, u := range urls {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^stage %d  %s  first chunk after \d+ms, done after \d+ms  \d+ chunks  \d+(\.\d)? [KM]?i?B  (next: stage %d|finished)$`, i, regexp.QuoteMeta(u), i+1))
		if !re.MatchString(stderr) {
			t.Errorf("no progress line for stage %d in:\n%s", i, stderr)
		}
	}
	if !regexp.MustCompile(`request r-42: wrote .* to ` + regexp.QuoteMeta(outPath) + ` \(.* s of wav at 16000 Hz\) in .*; first audio after \d+ms`).MatchString(stderr) {
		t.Errorf("stderr:\n%s", stderr)
	}
	got := readWAVFile(t, outPath)
	if got.SampleRate != wantAudio.SampleRate || !slices.Equal(got.Samples, wantAudio.Samples) {
		t.Errorf("audio: %d samples at %d Hz, say made %d at %d Hz", len(got.Samples), got.SampleRate, len(wantAudio.Samples), wantAudio.SampleRate)
	}
	var words []engine.Word
	if err := json.Unmarshal(stdout, &words); err != nil || !reflect.DeepEqual(words, wantWords) {
		t.Fatalf("stdout %q (%v), want %v", stdout, err, wantWords)
	}
}

func TestRunCoordinatorDefaults(t *testing.T) {
	urls, _ := startStageServers(t)
	wantAudio, _ := said(t, "text from stdin")
	t.Chdir(t.TempDir())
	key := keyFile(t)
	stdout, stderr, code := runWith(t, "text from stdin\n", "run", "--stage", urls[0], "--stage", urls[1], "--api-key-file", key, "-")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if len(stdout) != 0 {
		t.Errorf("stdout without --timestamps: %q", stdout)
	}
	if got := readWAVFile(t, "out.wav"); !slices.Equal(got.Samples, wantAudio.Samples) {
		t.Errorf("out.wav: %d samples, want %d", len(got.Samples), len(wantAudio.Samples))
	}
	if !strings.Contains(stderr, "to out.wav") {
		t.Errorf("stderr does not say where the audio went:\n%s", stderr)
	}

	// -o - writes a streaming WAV to standard output as it arrives.
	stdout, stderr, code = runWith(t, "", "run", "--stage", "0="+urls[0], "--stage", "1="+urls[1], "--api-key-file", key, "-o", "-", "text from stdin")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	got, err := audio.ReadWAV(bytes.NewReader(stdout))
	if err != nil || !slices.Equal(got.Samples, wantAudio.Samples) || !bytes.Equal(stdout[:audio.WAVHeaderLen], audio.WAVHeader(16000, audio.UnknownSize)) {
		t.Fatalf("stdout: %v, %d samples, want %d", err, len(got.Samples), len(wantAudio.Samples))
	}
}

func TestRunCoordinatorRetriesAnotherServer(t *testing.T) {
	urls, _ := startStageServers(t)
	dead := "http://" + testkit.FreeAddr(t)
	out := filepath.Join(t.TempDir(), "a.wav")
	_, stderr, code := runWith(t, "", "run", "--stage", "1="+dead+","+urls[1], "--stage", "0="+urls[0], "--api-key-file", keyFile(t), "-o", out, "hi")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "stage 1  "+dead+"  failed after") || !strings.Contains(stderr, "trying "+urls[1]) {
		t.Errorf("no retry line in:\n%s", stderr)
	}
}

// TestRunCoordinatorHungServer checks that a stage server that accepts
// connections but never answers (stopped, hung) fails the hop after
// --hop-timeout, and the stage's next server takes it.
func TestRunCoordinatorHungServer(t *testing.T) {
	urls, _ := startStageServers(t)
	hung, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	hungURL := "http://" + hung.Addr().String()
	out := filepath.Join(t.TempDir(), "a.wav")
	_, stderr, code := runWith(t, "", "run", "--hop-timeout", "300ms", "--stage", "1="+hungURL+","+urls[1], "--stage", "0="+urls[0], "--api-key-file", keyFile(t), "-o", out, "hi")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "no answer within 300ms") || !strings.Contains(stderr, "trying "+urls[1]) {
		t.Errorf("no timeout and retry line in:\n%s", stderr)
	}
	// With no other server, it says it tries the same one again.
	_, stderr, code = runWith(t, "", "run", "--hop-timeout", "200ms", "--stage", "1="+hungURL, "--stage", "0="+urls[0], "--api-key-file", keyFile(t), "-o", out, "hi")
	if code != ExitFailure || !strings.Contains(stderr, "trying it again (the stage has no other server)") || !strings.Contains(stderr, "giving up") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestRunCoordinatorFailures(t *testing.T) {
	urls, _ := startStageServers(t)
	key := keyFile(t)
	out := filepath.Join(t.TempDir(), "a.wav")

	_, stderr, code := runWith(t, "", "run", "--stage", urls[0], "--stage", urls[1], "--api-key-file", key, "--voice", "zzz", "-o", out, "hi")
	if code != ExitFailure {
		t.Fatalf("exit %d on a 400, want %d", code, ExitFailure)
	}
	if !strings.Contains(stderr, `stage 0 at `+urls[0]+` refused the request (400 bad_request): `) || !strings.Contains(stderr, `"zzz"`) {
		t.Errorf("stderr:\n%s", stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an output file was written for a failed run")
	}

	// Without the API key: a 401, not retried.
	_, stderr, code = runWith(t, "", "run", "--stage", urls[0]+","+urls[0], "--stage", urls[1], "-o", out, "hi")
	if code != ExitFailure || !strings.Contains(stderr, "(401 invalid_api_key)") || strings.Contains(stderr, "trying ") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}

	// Every server of a stage down: exit 1 naming the stage.
	_, stderr, code = runWith(t, "", "run", "--stage", "http://"+testkit.FreeAddr(t), "-o", out, "hi")
	if code != ExitFailure || !strings.Contains(stderr, "stage 0 at ") || !strings.Contains(stderr, "giving up") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}

	// An answer naming a stage nobody gave.
	_, stderr, code = runWith(t, "", "run", "--stage", urls[0], "--api-key-file", key, "-o", out, "hi")
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
