package browser

// TestPlayground: the page against two omnistage servers, one of several
// pipelines and one behind an API key.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// speech is what the test types: an emoji beyond the BMP before most
// words, so that a page which took the server's code point offsets for
// JavaScript's UTF-16 indices would highlight the wrong text.
const speech = "Hello 😀 world, from the omnistage playground. Every word lights up 😊 in turn."

// spokenWords are speech's words, which the page must highlight in this
// order, each sliced from the text as typed.
var spokenWords = []string{"Hello", "world", "from", "the", "omnistage", "playground", "Every", "word", "lights", "up", "in", "turn"}

// otherSpeech is what the test speaks with the other models, and
// otherWords its words.
const otherSpeech = "A second voice speaks here."

var otherWords = []string{"A", "second", "voice", "speaks", "here"}

// apiKey is the key of the second server.
const apiKey = "sk-playground-test-0123456789"

func TestPlayground(t *testing.T) {
	chromium := findChromium(t)
	start := time.Now()
	bin := buildOmnistage(t)
	// The first server serves the pipelines of testdata/kal16.yaml (another
	// voice, one of them without an aligner), then the default, tts, and
	// one that never starts.
	open := serve(t, bin, []string{"kal16", "kal16-plain", "tts"},
		"--config", testdata(t, "kal16.yaml"), "--config", "builtin:tts",
		"--config", testdata(t, "broken.yaml"), "--start-partial")
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte(apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The second server also runs a route that skips a stage.
	locked := serve(t, bin, nil, "--config", "builtin:tts-raw", "--api-key-file", keyFile)
	artifacts := artifactDir(t)
	page := &pageLog{}
	ctx := newBrowser(t, chromium, page)

	t.Run("speak", func(t *testing.T) { testSpeak(t, ctx, open.url, artifacts) })
	t.Run("models", func(t *testing.T) { testModels(t, ctx) })
	t.Run("bad request", func(t *testing.T) { testBadRequest(t, ctx) })
	t.Run("live", func(t *testing.T) { testLive(t, ctx, open.url) })
	t.Run("api key", func(t *testing.T) { testAPIKey(t, ctx, locked.url) })

	page.check(t, open.host, locked.host)
	t.Logf("screenshots in %s; took %s", artifacts, time.Since(start).Round(time.Millisecond))
}

// testSpeak opens the page of the server at url, checks its models, its
// pipeline and its labels, and speaks with the default model, taking the
// screenshots.
func testSpeak(t *testing.T, ctx context.Context, url, artifacts string) {
	do(t, ctx, 30*time.Second, chromedp.Navigate(url))
	waitFor(t, ctx, `omnistagePlayground.ready`, 20*time.Second)
	// The pipelines, not the aliases; the default chosen though not first;
	// the one that never started said so and not to be picked.
	if got, want := strs(t, ctx, `#model option`), []string{"kal16", "kal16-plain", "tts (default)", "broken (not ready)"}; !slices.Equal(got, want) {
		t.Errorf("models listed: %q, want %q", got, want)
	}
	if got := strs(t, ctx, `#model option`, `e => e.disabled ? "disabled" : ""`); !slices.Equal(got, []string{"", "", "", "disabled"}) {
		t.Errorf("models disabled: %q, want only broken", got)
	}
	wantModel(t, ctx, "tts", []string{"talker", "vocoder", "aligner"})
	if got := strs(t, ctx, `#pipeline .stage .tag`); !slices.Equal(got, []string{"inproc", "inproc", "inproc"}) {
		t.Errorf("placements drawn: %q", got)
	}
	wantLabels(t, ctx)
	if live := count(t, ctx, `#status[role=status][aria-live=polite]`) + count(t, ctx, `#error[role=alert]`); live != 2 {
		t.Errorf("the status and error regions are not live regions")
	}
	if n := count(t, ctx, `#voice option`); n < 5 {
		t.Errorf("the voice select has %d options, want the default, the voices and the aliases", n)
	}
	speak(t, ctx, speech)
	// Mid-sentence, with a word lit up: the desktop screenshot.
	waitFor(t, ctx, `omnistagePlayground.highlighted.length >= 7 || omnistagePlayground.lastError !== null`, 20*time.Second)
	screenshot(t, ctx, artifacts, "playground", desktop)
	// The audio plays in real time: about 6 s.
	checkHeard(t, ctx, heard{model: "tts", rate: 16000, words: spokenWords, stages: 3})
	screenshot(t, ctx, artifacts, "playground", phone)
}

// testModels picks the other models with the keyboard and speaks with
// them: each draws its pipeline, lists its voices, offers word timestamps
// only with an aligner, and its request names it.
func testModels(t *testing.T, ctx context.Context) {
	// Down from tts is the pipeline that never started: it is not picked.
	press(t, ctx, "#model", kb.ArrowDown)
	if v := value(t, ctx, "#model"); v != "tts" {
		t.Errorf("ArrowDown from tts picked %q; broken is not ready and must not be picked", v)
	}
	// Up twice at once: kal16, whose load replaces kal16-plain's.
	press(t, ctx, "#model", kb.ArrowUp+kb.ArrowUp)
	waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "kal16"`, 10*time.Second)
	wantModel(t, ctx, "kal16", []string{"talker", "vocoder", "enhance", "aligner"})
	wantVoices(t, ctx, "", "kal16")
	wantTimestamps(t, ctx, true)
	speak(t, ctx, otherSpeech)
	checkHeard(t, ctx, heard{model: "kal16", rate: 24000, words: otherWords, stages: 4})

	// kal16-plain has no aligner: no word timestamps, nothing highlighted.
	press(t, ctx, "#model", kb.ArrowDown)
	waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "kal16-plain"`, 10*time.Second)
	wantModel(t, ctx, "kal16-plain", []string{"talker", "vocoder"})
	wantVoices(t, ctx, "", "kal16")
	wantTimestamps(t, ctx, false)
	speak(t, ctx, otherSpeech)
	if st := checkHeard(t, ctx, heard{model: "kal16-plain", rate: 16000, stages: 2}); st.Words != 0 {
		t.Errorf("kal16-plain has no aligner, but the page received %d words", st.Words)
	}

	// Back to tts: its voices again, and the timestamps box as it was.
	press(t, ctx, "#model", kb.ArrowDown)
	waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "tts"`, 10*time.Second)
	wantModel(t, ctx, "tts", []string{"talker", "vocoder", "aligner"})
	if n := count(t, ctx, `#voice option`); n < 5 {
		t.Errorf("back on tts, the voice select has %d options, want its voices and aliases", n)
	}
	wantTimestamps(t, ctx, true)
}

func testBadRequest(t *testing.T, ctx context.Context) {
	for _, tc := range []struct {
		name, text, speed, want string
	}{
		{"speed", "Too fast.", "10", "speed 10 is outside 0.25..4"},
		{"empty text", "", "1", "input is missing or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do(t, ctx, 10*time.Second, typeInto("#text", tc.text), typeInto("#speed", tc.speed), chromedp.Click(chromedp.CSS("#speak")))
			waitFor(t, ctx, `omnistagePlayground.lastError !== null`, 10*time.Second)
			wantError(t, ctx, 400, tc.want)
		})
	}
}

// testAPIKey opens the page of the server at url, which asks for apiKey.
func testAPIKey(t *testing.T, ctx context.Context, url string) {
	do(t, ctx, 30*time.Second, chromedp.Navigate(url))
	// Without a key the page loads, and says what is missing.
	waitFor(t, ctx, `omnistagePlayground.state === "locked"`, 20*time.Second)
	wantError(t, ctx, 401, "missing API key")
	do(t, ctx, 10*time.Second, typeInto("#apikey", "sk-wrong"), typeInto("#text", "Key accepted."), chromedp.Click(chromedp.CSS("#speak")))
	waitFor(t, ctx, `omnistagePlayground.lastError !== null && omnistagePlayground.lastError.message.includes("incorrect")`, 10*time.Second)
	wantError(t, ctx, 401, "incorrect API key")
	// The right key, and Enter in its field speaks.
	do(t, ctx, 10*time.Second, typeInto("#apikey", apiKey+kb.Enter))
	waitFor(t, ctx, `omnistagePlayground.requestId !== "" && ["done", "error", "stopped"].includes(omnistagePlayground.state)`, 20*time.Second)
	if st := state(t, ctx); st.State != "done" || st.SamplesPlayed == 0 || !slices.Equal(st.Highlighted, []string{"Key", "accepted"}) {
		t.Errorf("with the key: state %q, %d samples played, highlighted %q, error %+v", st.State, st.SamplesPlayed, st.Highlighted, st.LastError)
	}
	if got := strs(t, ctx, `#model option`); !slices.Equal(got, []string{"tts-raw (default)"}) {
		t.Errorf("models listed with the key: %q, want tts-raw", got)
	}
	wantModel(t, ctx, "tts-raw", []string{"talker", "vocoder", "aligner"})
	if got := strs(t, ctx, `#skipped .stage.skipped .name`); !slices.Equal(got, []string{"enhance"}) {
		t.Errorf("skipped stages drawn: %q, want enhance", got)
	}
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.length + sessionStorage.length + document.cookie`))
	if err != nil || stored != "0" {
		t.Errorf("the page stored something (%q, %v); the key must stay in memory", stored, err)
	}
}

// wantLabels checks that every control has a name a screen reader can
// say.
func wantLabels(t *testing.T, ctx context.Context) {
	t.Helper()
	if got := strs(t, ctx, `input, select, textarea, button, a[href], [role=link]`, `e => (e.labels && e.labels.length) || e.getAttribute("aria-label") || e.textContent.trim() ? "" : (e.id || e.outerHTML)`); slices.ContainsFunc(got, func(s string) bool { return s != "" }) {
		t.Errorf("controls without a label: %q", got)
	}
}

// heard is what a request the page spoke should leave on it.
type heard struct {
	model  string   // the model the request named
	rate   int      // its audio's sample rate
	words  []string // the words highlighted, in order
	stages int      // the stages whose timelines are drawn
}

// checkHeard waits for the page's request to end, and checks that it was
// want.model's, played all the audio it received at want.rate,
// highlighted want.words, drew want.stages timelines, offers the WAV, and
// shows its id and times. It returns the page's counters.
func checkHeard(t *testing.T, ctx context.Context, want heard) pageState {
	t.Helper()
	waitFor(t, ctx, `["done", "error", "stopped"].includes(omnistagePlayground.state)`, 40*time.Second)
	st := state(t, ctx)
	if st.State != "done" || st.LastError != nil {
		t.Fatalf("state %q, error %+v; want done", st.State, st.LastError)
	}
	if st.Model != want.model {
		t.Errorf("the request was %s's, want %s's", st.Model, want.model)
	}
	if st.SamplesReceived == 0 || st.SampleRate != want.rate {
		t.Fatalf("received %d samples at %d Hz, want some at %d Hz", st.SamplesReceived, st.SampleRate, want.rate)
	}
	if st.SamplesScheduled != st.SamplesReceived || st.SamplesPlayed != st.SamplesReceived {
		t.Errorf("received %d samples, scheduled %d, played %d; want all played", st.SamplesReceived, st.SamplesScheduled, st.SamplesPlayed)
	}
	if !slices.Equal(st.Highlighted, want.words) {
		t.Errorf("highlighted %q, want %q", st.Highlighted, want.words)
	}
	if segs := count(t, ctx, `#timings .trow[role=img] .seg`); st.StagesDrawn != want.stages || segs != 4*want.stages {
		t.Errorf("timings drew %d stages with %d bar segments, want %d with 4 each", st.StagesDrawn, segs, want.stages)
	}
	if st.WavBytes != 44+2*st.SamplesReceived {
		t.Errorf("the WAV download has %d bytes, want %d", st.WavBytes, 44+2*st.SamplesReceived)
	}
	for _, id := range []string{"stat-id", "stat-ttfa", "stat-total", "stat-rtf"} {
		if v := text(t, ctx, "#"+id); v == "" || v == "–" {
			t.Errorf("#%s shows %q", id, v)
		}
	}
	if got := text(t, ctx, "#stat-id"); got != st.RequestID || got == "" {
		t.Errorf("request id %q shown, %q received", got, st.RequestID)
	}
	return st
}

// wantModel checks that model is chosen, loaded, and its pipeline drawn
// with the stages named stages, in order.
func wantModel(t *testing.T, ctx context.Context, model string, stages []string) {
	t.Helper()
	if st := state(t, ctx); !st.Ready || st.Model != model || value(t, ctx, "#model") != model {
		t.Errorf("model %q chosen, %q loaded (ready %v); want %q", value(t, ctx, "#model"), st.Model, st.Ready, model)
	}
	if got := text(t, ctx, "#pipeline-name"); got != model {
		t.Errorf("pipeline %q drawn, want %q", got, model)
	}
	if got := strs(t, ctx, `#pipeline .stage .name`); !slices.Equal(got, stages) {
		t.Errorf("pipeline %s drew %q, want %q", model, got, stages)
	}
}

// wantVoices checks the voice select's values.
func wantVoices(t *testing.T, ctx context.Context, want ...string) {
	t.Helper()
	if got := strs(t, ctx, `#voice option`, `e => e.value`); !slices.Equal(got, want) {
		t.Errorf("voices listed: %q, want %q", got, want)
	}
}

// wantTimestamps checks that the word timestamps box is offered, and
// checked, or neither.
func wantTimestamps(t *testing.T, ctx context.Context, offered bool) {
	t.Helper()
	got := strs(t, ctx, `#timestamps`, `e => (e.disabled ? "disabled" : "enabled") + (e.checked ? " checked" : "")`)
	want := map[bool]string{true: "enabled checked", false: "disabled"}[offered]
	if !slices.Equal(got, []string{want}) {
		t.Errorf("the word timestamps box is %q, want %q", got, want)
	}
}

// speak types text and presses Speak, and returns once the page has sent
// the request.
func speak(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	sent := state(t, ctx).Requests
	do(t, ctx, 10*time.Second, typeInto("#text", text), chromedp.Click(chromedp.CSS("#speak")))
	waitFor(t, ctx, fmt.Sprintf(`omnistagePlayground.requests > %d`, sent), 10*time.Second)
}

// testdata returns the absolute path of testdata/name.
func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
