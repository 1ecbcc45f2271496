package browser

// Reading and driving the page: its counters, its text, keys and waits,
// and screenshots.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The viewports of the screenshots.
var (
	desktop = viewport{"desktop", 1280, 800}
	phone   = viewport{"phone", 390, 844}
)

type viewport struct {
	name          string
	width, height int64
}

// pageState is window.omnistagePlayground: the page's counters.
type pageState struct {
	Ready            bool       `json:"ready"`
	State            string     `json:"state"`
	Model            string     `json:"model"`
	Requests         int        `json:"requests"`
	Words            int        `json:"words"`
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

// press focuses the element sel and presses keys on it.
func press(t *testing.T, ctx context.Context, sel, keys string) {
	t.Helper()
	do(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS(sel), keys))
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

// value returns the value of the form control sel.
func value(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).value`, sel)))
	if err != nil {
		t.Fatalf("value of %s: %v", sel, err)
	}
	return s
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
// NAME-VP.png (the viewport) and NAME-VP-full.png (the whole page), and
// checks that the page fits vp's width.
func screenshot(t *testing.T, ctx context.Context, dir, name string, vp viewport) {
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
	for file, shot := range map[string]chromedp.Action[[]byte]{
		name + "-" + vp.name + ".png":      chromedp.CaptureScreenshot(),
		name + "-" + vp.name + "-full.png": chromedp.FullScreenshot(100),
	} {
		png, err := chromedp.Run(ctx, shot)
		if err != nil {
			t.Fatalf("screenshot at %s width: %v", vp.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
