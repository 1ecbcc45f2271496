package browser

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
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

// apiKey is the key of the second server.
const apiKey = "sk-playground-test-0123456789"

// The viewports of the screenshots.
var (
	desktop = viewport{"desktop", 1280, 800}
	phone   = viewport{"phone", 390, 844}
)

type viewport struct {
	name          string
	width, height int64
}

func TestPlayground(t *testing.T) {
	chromium := findChromium(t)
	start := time.Now()
	bin := buildOmnistage(t)
	open := serve(t, bin)
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte(apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The second server also runs a route that skips a stage.
	locked := serve(t, bin, "--config", "builtin:tts-raw", "--api-key-file", keyFile)
	artifacts := artifactDir(t)
	page := &pageLog{}
	ctx := newBrowser(t, chromium, page)

	t.Run("speak", func(t *testing.T) {
		do(t, ctx, 30*time.Second, chromedp.Navigate(open.url))
		waitFor(t, ctx, `omnistagePlayground.ready`, 20*time.Second)
		if got, want := strs(t, ctx, `#pipeline .stage .name`), []string{"talker", "vocoder", "aligner"}; !slices.Equal(got, want) {
			t.Errorf("pipeline drew %q, want %q", got, want)
		}
		if got := strs(t, ctx, `#pipeline .stage .tag`); !slices.Equal(got, []string{"inproc", "inproc", "inproc"}) {
			t.Errorf("placements drawn: %q", got)
		}
		// Every control has a name a screen reader can say.
		if got := strs(t, ctx, `input, select, textarea, button, a[href], [role=link]`, `e => (e.labels && e.labels.length) || e.getAttribute("aria-label") || e.textContent.trim() ? "" : (e.id || e.outerHTML)`); slices.ContainsFunc(got, func(s string) bool { return s != "" }) {
			t.Errorf("controls without a label: %q", got)
		}
		if live := count(t, ctx, `#status[role=status][aria-live=polite]`) + count(t, ctx, `#error[role=alert]`); live != 2 {
			t.Errorf("the status and error regions are not live regions")
		}
		if n := count(t, ctx, `#voice option`); n < 5 {
			t.Errorf("the voice select has %d options, want the default, the voices and the aliases", n)
		}
		do(t, ctx, 10*time.Second, typeInto("#text", speech), chromedp.Click(chromedp.CSS("#speak")))
		// Mid-sentence, with a word lit up: the desktop screenshot.
		waitFor(t, ctx, `omnistagePlayground.highlighted.length >= 7 || omnistagePlayground.lastError !== null`, 20*time.Second)
		screenshot(t, ctx, artifacts, desktop)
		// The audio plays in real time: about 6 s.
		waitFor(t, ctx, `["done", "error", "stopped"].includes(omnistagePlayground.state)`, 40*time.Second)
		st := state(t, ctx)
		if st.State != "done" || st.LastError != nil {
			t.Fatalf("state %q, error %+v; want done", st.State, st.LastError)
		}
		if st.SamplesReceived == 0 || st.SampleRate == 0 {
			t.Fatalf("received %d samples at %d Hz", st.SamplesReceived, st.SampleRate)
		}
		if st.SamplesScheduled != st.SamplesReceived || st.SamplesPlayed != st.SamplesReceived {
			t.Errorf("received %d samples, scheduled %d, played %d; want all played", st.SamplesReceived, st.SamplesScheduled, st.SamplesPlayed)
		}
		if !slices.Equal(st.Highlighted, spokenWords) {
			t.Errorf("highlighted %q, want %q", st.Highlighted, spokenWords)
		}
		if st.StagesDrawn != 3 || count(t, ctx, `#timings .trow[role=img] .seg`) != 12 {
			t.Errorf("timings drew %d stages with %d bar segments, want 3 with 4 each", st.StagesDrawn, count(t, ctx, `#timings .trow[role=img] .seg`))
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
		screenshot(t, ctx, artifacts, phone)
	})

	t.Run("bad request", func(t *testing.T) {
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
	})

	t.Run("api key", func(t *testing.T) {
		do(t, ctx, 30*time.Second, chromedp.Navigate(locked.url))
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
		if got, want := strs(t, ctx, `#pipeline .stage .name`), []string{"talker", "vocoder", "aligner"}; !slices.Equal(got, want) {
			t.Errorf("pipeline drew %q, want %q", got, want)
		}
		if got := strs(t, ctx, `#skipped .stage.skipped .name`); !slices.Equal(got, []string{"enhance"}) {
			t.Errorf("skipped stages drawn: %q, want enhance", got)
		}
		stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.length + sessionStorage.length + document.cookie`))
		if err != nil || stored != "0" {
			t.Errorf("the page stored something (%q, %v); the key must stay in memory", stored, err)
		}
	})

	page.check(t, open.host, locked.host)
	t.Logf("screenshots in %s; took %s", artifacts, time.Since(start).Round(time.Millisecond))
}

// pageState is window.omnistagePlayground: the page's counters.
type pageState struct {
	Ready            bool       `json:"ready"`
	State            string     `json:"state"`
	SamplesReceived  int        `json:"samplesReceived"`
	SamplesScheduled int        `json:"samplesScheduled"`
	SamplesPlayed    int        `json:"samplesPlayed"`
	SampleRate       int        `json:"sampleRate"`
	Highlighted      []string   `json:"highlighted"`
	StagesDrawn      int        `json:"stagesDrawn"`
	PipelineDrawn    int        `json:"pipelineDrawn"`
	RequestID        string     `json:"requestId"`
	WavBytes         int        `json:"wavBytes"`
	LastError        *pageError `json:"lastError"`
}

type pageError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func state(t *testing.T, ctx context.Context) pageState {
	t.Helper()
	st, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](`window.omnistagePlayground`))
	if err != nil {
		t.Fatalf("reading the page's counters: %v", err)
	}
	return st
}

// wantError checks that the page shows an error of status whose message
// holds want, both in its counters and on screen.
func wantError(t *testing.T, ctx context.Context, status int, want string) {
	t.Helper()
	st := state(t, ctx)
	if st.LastError == nil || st.LastError.Status != status || !strings.Contains(st.LastError.Message, want) {
		t.Errorf("last error %+v; want status %d with %q", st.LastError, status, want)
	}
	shown := text(t, ctx, "#error")
	if !strings.Contains(shown, want) || !strings.Contains(shown, fmt.Sprint(status)) {
		t.Errorf("the page shows %q; want the %d and %q", shown, status, want)
	}
}

// do runs actions, failing the test after timeout.
func do(t *testing.T, ctx context.Context, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// typeInto empties the field sel and types s into it, key by key.
func typeInto(sel, s string) chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel)),
	}
	if s != "" {
		steps = append(steps, chromedp.SendKeys(chromedp.CSS(sel), s))
	}
	return chromedp.Steps(steps...)
}

// waitFor polls the JavaScript expression cond until it is true.
func waitFor(t *testing.T, ctx context.Context, cond string, timeout time.Duration) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		st, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.omnistagePlayground)`))
		t.Fatalf("waiting for %s: %v; page: %s", cond, err, st)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// strs returns, for each element sel matches, its text, or what the
// JavaScript function of it fn returns.
func strs(t *testing.T, ctx context.Context, sel string, fn ...string) []string {
	t.Helper()
	f := "e => e.textContent.trim()"
	if len(fn) > 0 {
		f = fn[0]
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll(%q), %s)`, sel, f)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return v
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("counting %s: %v", sel, err)
	}
	return n
}

// screenshot saves the page at vp's size, from its top, as
// playground-NAME.png (the viewport) and playground-NAME-full.png (the
// whole page), and checks that the page fits vp's width.
func screenshot(t *testing.T, ctx context.Context, dir string, vp viewport) {
	t.Helper()
	var opts []chromedp.EmulateViewportOption
	if vp.width < 600 {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	do(t, ctx, 10*time.Second,
		chromedp.EmulateViewport(vp.width, vp.height, opts...),
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
	)
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow > 0 {
		t.Errorf("at %s width (%d px) the page is %d px too wide", vp.name, vp.width, overflow)
	}
	for name, shot := range map[string]chromedp.Action[[]byte]{
		"playground-" + vp.name + ".png":      chromedp.CaptureScreenshot(),
		"playground-" + vp.name + "-full.png": chromedp.FullScreenshot(100),
	} {
		png, err := chromedp.Run(ctx, shot)
		if err != nil {
			t.Fatalf("screenshot at %s width: %v", vp.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pageLog records what the page did that the test checks at the end.
type pageLog struct {
	mu       sync.Mutex
	errors   []string // console errors and uncaught exceptions
	requests []string // the URL of every request
	failed   []string // page files that did not load
}

// record is the browser's event listener; it must return fast.
func (p *pageLog) record(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p.errors = append(p.errors, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		p.errors = append(p.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *log.EventEntryAdded:
		// The browser logs every 4xx answer as an error: the API's are the
		// errors this test provokes, and their messages are checked on the
		// page; any other is a page file that did not load.
		e := ev.Entry
		if e.Level == log.EntryLevelError && !(e.Source == log.EntrySourceNetwork && isAPI(e.URL)) {
			p.errors = append(p.errors, fmt.Sprintf("browser log (%s): %s %s", e.Source, e.Text, e.URL))
		}
	case *network.EventRequestWillBeSent:
		p.requests = append(p.requests, ev.Request.URL)
	case *network.EventResponseReceived:
		if r := ev.Response; r.Status >= 400 && !isAPI(r.URL) {
			p.failed = append(p.failed, fmt.Sprintf("%s: %d", r.URL, r.Status))
		}
	}
}

// isAPI reports whether u is an API call of the page, not one of its files.
func isAPI(u string) bool {
	pu, err := url.Parse(u)
	return err == nil && strings.HasPrefix(pu.Path, "/v1/")
}

// check fails the test on a console error, an exception, a page file that
// did not load, or a request to a host other than hosts.
func (p *pageLog) check(t *testing.T, hosts ...string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errors {
		t.Errorf("page: %s", e)
	}
	for _, f := range p.failed {
		t.Errorf("page file did not load: %s", f)
	}
	if len(p.requests) == 0 {
		t.Error("saw no request: the network listener is broken")
	}
	for _, r := range p.requests {
		u, err := url.Parse(r)
		if err != nil {
			t.Errorf("request to %q: %v", r, err)
			continue
		}
		switch u.Scheme {
		case "data", "blob":
			continue
		}
		if !slices.Contains(hosts, u.Host) {
			t.Errorf("request to %s: a host other than the servers (%s)", r, strings.Join(hosts, ", "))
		}
	}
}

// newBrowser starts headless chromium, with every event of its tab going
// to p, and stops it when the test ends.
func newBrowser(t *testing.T, execPath string, p *pageLog) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.WindowSize(int(desktop.width), int(desktop.height)),
		// Web Audio starts without a click; the test clicks anyway.
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses root otherwise
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Listen(ctx, p.record); err != nil {
		t.Fatalf("starting %s: %v", execPath, err)
	}
	return ctx
}

// findChromium returns the path of Debian's chromium, or skips the test.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed: scripts/install-deps.sh installs it (apt-get install chromium)")
	return ""
}

// artifactDir returns where the screenshots go: $OMNISTAGE_ARTIFACTS, or
// the test's artifact directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("OMNISTAGE_ARTIFACTS")
	if dir == "" {
		return t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildOmnistage builds cmd/omnistage as a user does and returns its path.
func buildOmnistage(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "omnistage")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/omnistage")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/omnistage: %v\n%s", err, out)
	}
	return bin
}

// server is an `omnistage serve` process.
type server struct {
	url, host string
	cmd       *exec.Cmd
	out       *syncBuffer // its stderr: JSON log lines
	done      chan error
}

// listening matches the server's log line that names its address.
var listening = regexp.MustCompile(`"msg":"http server listening","addr":"([0-9.:]+)"`)

// serve starts `omnistage serve --addr 127.0.0.1:0 args...`, returns once
// it is ready, and stops it with SIGTERM when the test ends.
func serve(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	s := &server{out: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	s.cmd.Stderr = s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(time.Minute)
	for {
		if m := listening.FindStringSubmatch(s.out.String()); m != nil {
			s.host, s.url = m[1], "http://"+m[1]+"/"
			break
		}
		s.wait(t, deadline)
	}
	for {
		resp, err := http.Get(s.url + "ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		s.wait(t, deadline)
	}
}

// wait pauses while s starts, failing the test if s has exited or the
// deadline has passed.
func (s *server) wait(t *testing.T, deadline time.Time) {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		t.Fatalf("omnistage serve exited while starting (%v):\n%s", err, s.out)
	case <-time.After(20 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		t.Fatalf("omnistage serve not ready after a minute:\n%s", s.out)
	}
}

func (s *server) stop(t *testing.T) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("omnistage serve: %v\n%s", err, s.out)
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("omnistage serve did not stop within 30 s")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
