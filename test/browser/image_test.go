package browser

// TestPlaygroundImage: image mode against a server of the OCR pipelines
// on their real models, read-aloud and ocr, and tts.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/omnistage/omnistage/internal/testdeps"
)

// imageState is window.omnistagePlayground.image.
type imageState struct {
	Active     bool     `json:"active"`
	Requests   int      `json:"requests"`
	File       string   `json:"file"`
	Regions    int      `json:"regions"`
	Text       string   `json:"text"`
	Notes      []string `json:"notes"`
	LitRegions []int    `json:"litRegions"`
}

func imageCounters(t *testing.T, ctx context.Context) imageState {
	t.Helper()
	st, err := chromedp.Run(ctx, chromedp.Evaluate[imageState](`window.omnistagePlayground.image`))
	if err != nil {
		t.Fatalf("reading the page's image counters: %v", err)
	}
	return st
}

func TestPlaygroundImage(t *testing.T) {
	chromium := findChromium(t)
	start := time.Now()
	files := testImages(t)
	bin := buildOmnistage(t)
	// tts too: the page goes back to text mode for it.
	srv := serve(t, bin, nil, "--config", "builtin:read-aloud", "--config", "builtin:ocr", "--config", "builtin:tts", "--start-partial")
	skipUnavailable(t, srv, "read-aloud", "ocr")
	answers := map[string]answer{
		"doc":    generate(t, srv, "read-aloud", files.doc),
		"zh":     generate(t, srv, "read-aloud", files.zh),
		"ocrdoc": generate(t, srv, "ocr", files.doc),
		"ocrzh":  generate(t, srv, "ocr", files.zh),
	}
	artifacts := artifactDir(t)
	page := &pageLog{}
	ctx := newBrowser(t, chromium, page)

	do(t, ctx, 30*time.Second, chromedp.Navigate(srv.url))
	waitFor(t, ctx, `omnistagePlayground.ready`, 20*time.Second)
	t.Run("mode", func(t *testing.T) {
		// tts, the default, takes text; read-aloud reads images: the image
		// field, not the text box; its file picker takes the image types.
		if got, want := strs(t, ctx, `#model option`), []string{"read-aloud", "ocr", "tts (default)"}; !slices.Equal(got, want) {
			t.Errorf("models listed: %q, want %q", got, want)
		}
		wantImageMode(t, ctx, false)
		press(t, ctx, "#model", kb.ArrowUp+kb.ArrowUp)
		waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "read-aloud"`, 10*time.Second)
		wantModel(t, ctx, "read-aloud", []string{"det", "cls", "rec", "talker", "vocoder", "aligner"})
		wantImageMode(t, ctx, true)
		if got := strs(t, ctx, `#image-file`, `e => e.accept + " " + e.labels[0].textContent`); !slices.Equal(got, []string{"image/png,image/jpeg,image/webp Image"}) {
			t.Errorf("the file picker: %q", got)
		}
		wantLabels(t, ctx)
		// The picker is next after the model, by keyboard.
		press(t, ctx, "#model", kb.Tab)
		if got := strs(t, ctx, `:focus`, `e => e.id`); !slices.Equal(got, []string{"image-file"}) {
			t.Errorf("Tab from the model select focuses %q, want the file picker", got)
		}
	})
	t.Run("read aloud", func(t *testing.T) {
		watchLit(t, ctx)
		before := imageCounters(t, ctx).Requests
		do(t, ctx, 10*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#image-file"), []string{files.doc}))
		// Mid-reading, a box lit: the desktop screenshot.
		waitFor(t, ctx, `omnistagePlayground.image.litRegions.length >= 2 || omnistagePlayground.lastError !== null`, 20*time.Second)
		screenshot(t, ctx, artifacts, "playground-image", desktop)
		checkRead(t, ctx, before, answers["doc"], true)
		checkLit(t, ctx, answers["doc"])
	})
	t.Run("not spoken", func(t *testing.T) {
		// Dropped on the page: Chinese, read but not spoken, the notes say so.
		before := imageCounters(t, ctx).Requests
		dropFile(t, ctx, files.zh, "#transcript")
		checkRead(t, ctx, before, answers["zh"], false)
		notes := strs(t, ctx, `#notes li`)
		if len(notes) == 0 || len(notes) != len(answers["zh"].Notes) || !strings.Contains(notes[0], "is not spoken") || count(t, ctx, `#notes-box:not([hidden])`) != 1 {
			t.Errorf("notes shown %q; want the answer's %d, saying what is not spoken", notes, len(answers["zh"].Notes))
		}
		if got := text(t, ctx, "#status"); !strings.Contains(got, "nothing was spoken") {
			t.Errorf("status %q; want it to say nothing was spoken", got)
		}
	})
	t.Run("ocr", func(t *testing.T) {
		press(t, ctx, "#model", kb.ArrowDown)
		waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "ocr"`, 10*time.Second)
		wantImageMode(t, ctx, true)
		if got := text(t, ctx, "#speak"); got != "Read" {
			t.Errorf("the button says %q for ocr, want Read", got)
		}
		// Read sends the image chosen, the one dropped, to ocr.
		before := imageCounters(t, ctx).Requests
		do(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#speak")))
		checkRead(t, ctx, before, answers["ocrzh"], false)
		// Another, picked (the picker's dialog is the browser's: the file
		// is set as a user's choice sets it).
		before = imageCounters(t, ctx).Requests
		do(t, ctx, 10*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#image-file"), []string{files.doc}))
		checkRead(t, ctx, before, answers["ocrdoc"], false)
		if n := count(t, ctx, `#notes-box:not([hidden])`); n != 0 {
			t.Errorf("notes shown for ocr's answer, which has none")
		}
	})
	t.Run("bad files", func(t *testing.T) {
		for _, tc := range []struct{ name, path, want string }{
			{"not an image", files.notImage, "not an image"},
			{"too large", files.huge, "the limit is 16"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := imageCounters(t, ctx).Requests
				dropFile(t, ctx, tc.path, "#pipeline")
				waitFor(t, ctx, fmt.Sprintf(`omnistagePlayground.image.requests > %d && omnistagePlayground.lastError !== null`, before), 20*time.Second)
				wantError(t, ctx, 400, tc.want)
				if n := count(t, ctx, `#regions-svg polygon`); n != 0 {
					t.Errorf("%d regions drawn for a bad file", n)
				}
			})
		}
	})
	t.Run("text mode", func(t *testing.T) {
		press(t, ctx, "#model", kb.ArrowDown)
		waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "tts"`, 10*time.Second)
		wantImageMode(t, ctx, false)
		wantTimestamps(t, ctx, true)
		speak(t, ctx, otherSpeech)
		checkHeard(t, ctx, heard{model: "tts", rate: 16000, words: otherWords, stages: 3})
		// Back to read-aloud: the phone screenshot of image mode.
		press(t, ctx, "#model", kb.ArrowUp+kb.ArrowUp)
		waitFor(t, ctx, `omnistagePlayground.ready && omnistagePlayground.model === "read-aloud"`, 10*time.Second)
		wantImageMode(t, ctx, true)
		do(t, ctx, 10*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#image-file"), []string{files.doc}))
		waitFor(t, ctx, `omnistagePlayground.image.litRegions.length >= 1 || omnistagePlayground.lastError !== null`, 20*time.Second)
		screenshot(t, ctx, artifacts, "playground-image", phone)
		do(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#stop")))
	})

	page.check(t, srv.host)
	t.Logf("screenshots in %s; took %s", artifacts, time.Since(start).Round(time.Millisecond))
}

// wantImageMode checks that the page shows image mode's field and panel
// and hides the text box, or the other way round.
func wantImageMode(t *testing.T, ctx context.Context, on bool) {
	t.Helper()
	// In document order: the form's, then the panel.
	got := strs(t, ctx, `#image-file, #text, #voice, #image-panel`, `e => e.offsetParent !== null ? "shown" : "hidden"`)
	want := []string{"shown", "hidden", "hidden", "shown"}
	if !on {
		want = []string{"hidden", "shown", "shown", "hidden"}
	}
	if !slices.Equal(got, want) {
		t.Errorf("image mode %v: the image field, text box, voice and image panel are %q, want %q", on, got, want)
	}
	if st := imageCounters(t, ctx); st.Active != on {
		t.Errorf("image mode active %v, want %v", st.Active, on)
	}
}

// checkRead waits for the page's image request after the first before to
// end, and checks that it drew the answer's regions over the image where
// the answer puts them, listed their texts, showed its text, and played
// its audio if speaks.
func checkRead(t *testing.T, ctx context.Context, before int, want answer, speaks bool) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf(`omnistagePlayground.image.requests > %d && ["done", "error", "stopped"].includes(omnistagePlayground.state)`, before), 40*time.Second)
	st := state(t, ctx)
	if st.State != "done" || st.LastError != nil {
		t.Fatalf("state %q, error %+v; want done", st.State, st.LastError)
	}
	img := imageCounters(t, ctx)
	if strings.TrimSuffix(img.Text, "\n") != want.Text || text(t, ctx, "#transcript") != strings.TrimSpace(want.Text) {
		t.Errorf("text %q received, %q shown; want %q", img.Text, text(t, ctx, "#transcript"), want.Text)
	}
	if got := strs(t, ctx, `#regions-list li`, `e => e.firstChild.textContent`); !slices.Equal(got, want.regionTexts()) {
		t.Errorf("regions listed %q, want %q", got, want.regionTexts())
	}
	drawn := drawnRegions(t, ctx)
	if len(drawn) != len(want.Regions) || img.Regions != len(want.Regions) {
		t.Fatalf("%d regions drawn (%d counted), want %d", len(drawn), img.Regions, len(want.Regions))
	}
	for i, d := range drawn {
		w := want.Regions[i]
		if d.Index != w.Index || d.Title != w.Text {
			t.Errorf("region %d drawn as %d titled %q, want %d %q", i, d.Index, d.Title, w.Index, w.Text)
		}
		// Its points are the box's, in the image's pixels; on screen it
		// covers the box's part of the image as shown.
		if !samePoints(d.Points, w.Box) {
			t.Errorf("region %d drawn at %q, want %v", i, d.Points, w.Box)
		}
		b := bounds(w.Box)
		tol := 2 + d.Scale // 2 pixels of the image, and one of the screen
		for k := range b {
			if math.Abs(d.Rect[k]-b[k]) > tol {
				t.Errorf("region %d covers %.1f of the image on screen, want %.1f", i, d.Rect, b)
				break
			}
		}
	}
	if !speaks {
		if st.SamplesReceived != 0 {
			t.Errorf("received %d samples of an answer with no audio", st.SamplesReceived)
		}
		return
	}
	if st.SamplesReceived == 0 || st.SampleRate != 16000 || st.SamplesPlayed != st.SamplesReceived {
		t.Errorf("received %d samples at %d Hz, played %d; want all played, at 16000 Hz", st.SamplesReceived, st.SampleRate, st.SamplesPlayed)
	}
	if !slices.Equal(st.Highlighted, want.words()) {
		t.Errorf("words spoken %q, want the answer's %q", st.Highlighted, want.words())
	}
	if st.WavBytes != 44+2*st.SamplesReceived || st.StagesDrawn != 6 {
		t.Errorf("the WAV has %d bytes for %d samples; %d stage timings drawn, want 6", st.WavBytes, st.SamplesReceived, st.StagesDrawn)
	}
}

// drawn is a region's box as the page drew it: its index, title and
// points, and the part of the image it covers on screen (x0, y0, x1, y1,
// in the image's pixels, Scale of them to a screen pixel).
type drawn struct {
	Index  int        `json:"index"`
	Title  string     `json:"title"`
	Points string     `json:"points"`
	Rect   [4]float64 `json:"rect"`
	Scale  float64    `json:"scale"`
}

func drawnRegions(t *testing.T, ctx context.Context) []drawn {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]drawn](`(() => {
		const img = document.querySelector('#image-view');
		const box = img.getBoundingClientRect();
		const sx = img.naturalWidth / box.width, sy = img.naturalHeight / box.height;
		return Array.from(document.querySelectorAll('#regions-svg polygon'), (p) => {
			const r = p.getBoundingClientRect();
			return {
				index: Number(p.dataset.index), title: p.querySelector('title').textContent, points: p.getAttribute('points'),
				rect: [(r.left - box.left) * sx, (r.top - box.top) * sy, (r.right - box.left) * sx, (r.bottom - box.top) * sy],
				scale: Math.max(sx, sy),
			};
		});
	})()`))
	if err != nil {
		t.Fatalf("reading the regions drawn: %v", err)
	}
	return got
}

// samePoints reports whether the SVG points list s is box.
func samePoints(s string, box [4][2]float64) bool {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	if len(f) != 8 {
		return false
	}
	for i, v := range f {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.Abs(x-box[i/2][i%2]) > 0.01 {
			return false
		}
	}
	return true
}

// bounds returns the box's bounding rectangle: x0, y0, x1, y1.
func bounds(box [4][2]float64) [4]float64 {
	b := [4]float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for _, p := range box {
		b[0], b[2] = min(b[0], p[0]), max(b[2], p[0])
		b[1], b[3] = min(b[1], p[1]), max(b[3], p[1])
	}
	return b
}

// litSnapshot is the page as it was after a change: the regions whose
// boxes were lit, and the word lit in the text (its text and code point
// offset, or "" and -1).
type litSnapshot struct {
	Lit  []int  `json:"lit"`
	Word string `json:"word"`
	Char int    `json:"char"`
}

// watchLit records, from now on, what the page lights after each change
// of its elements' classes, in window.litLog.
func watchLit(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, 10*time.Second, chromedp.Evaluate[chromedp.Void](`(() => {
		const log = window.litLog = [];
		const snap = () => {
			const lit = Array.from(document.querySelectorAll('#regions-svg .region.lit'), (p) => Number(p.dataset.index));
			const cur = document.querySelector('#transcript .w.current');
			const s = { lit, word: cur ? cur.textContent : '', char: cur ? Number(cur.dataset.charStart) : -1 };
			if (!log.length || JSON.stringify(log[log.length - 1]) !== JSON.stringify(s)) log.push(s);
		};
		new MutationObserver(snap).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['class'] });
	})()`))
}

// checkLit checks what watchLit saw: while a word was lit, its region's
// box and only it was lit, the word lying in the region's text; with no
// word lit, no box; and the boxes lit in turn were the answer's regions
// with words, in the order they are spoken.
func checkLit(t *testing.T, ctx context.Context, want answer) {
	t.Helper()
	log, err := chromedp.Run(ctx, chromedp.Evaluate[[]litSnapshot](`window.litLog`))
	if err != nil {
		t.Fatal(err)
	}
	text := []rune(want.Text)
	var order []int
	for _, s := range log {
		if s.Word == "" {
			if len(s.Lit) != 0 {
				t.Errorf("boxes %v lit with no word lit", s.Lit)
			}
			continue
		}
		if len(s.Lit) != 1 {
			t.Errorf("word %q lit with boxes %v; want its region's alone", s.Word, s.Lit)
			continue
		}
		r, ok := want.region(s.Lit[0])
		n := len([]rune(s.Word))
		if !ok || s.Char < r.CharStart || s.Char+n > r.CharEnd || string(text[s.Char:s.Char+n]) != s.Word {
			t.Errorf("word %q at %d lit with region %d's box (%+v)", s.Word, s.Char, s.Lit[0], r)
		}
		if len(order) == 0 || order[len(order)-1] != s.Lit[0] {
			order = append(order, s.Lit[0])
		}
	}
	if wantOrder := want.spokenRegions(); len(wantOrder) < 2 || !slices.Equal(order, wantOrder) {
		t.Errorf("boxes lit in turn %v, want %v (the regions of the answer's words, in order)", order, wantOrder)
	}
	if got := imageCounters(t, ctx).LitRegions; !slices.Equal(got, order) {
		t.Errorf("the page counts boxes lit %v, the page showed %v", got, order)
	}
}

// skipUnavailable skips the test if any of the pipelines of s failed to
// start (the models are not installed), saying why.
func skipUnavailable(t *testing.T, s *server, names ...string) {
	t.Helper()
	var ready struct {
		Unavailable map[string]string `json:"unavailable"`
	}
	getJSON(t, s.url+"ready", &ready)
	for _, n := range names {
		if why, ok := ready.Unavailable[n]; ok {
			testdeps.Missing(t, "pipeline %s did not start (scripts/install-deps.sh installs ONNX Runtime and the PP-OCR models): %s", n, why)
		}
	}
}

// dropFile drops the file at path onto the element sel as a user drops
// one from a file manager.
func dropFile(t *testing.T, ctx context.Context, path, sel string) {
	t.Helper()
	xy, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		e.scrollIntoView({ block: 'center' });
		const r = e.getBoundingClientRect();
		return [r.left + r.width / 2, r.top + Math.min(r.height / 2, 20)];
	})()`, sel)))
	if err != nil {
		t.Fatalf("finding %s: %v", sel, err)
	}
	do(t, ctx, 10*time.Second, dragFiles(xy[0], xy[1], path))
}
