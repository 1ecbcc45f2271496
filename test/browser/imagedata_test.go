package browser

// The images image mode is given, the API's answers for them, and the
// file drop that gives one.

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// imageFiles are the paths of the test's files.
type imageFiles struct {
	doc      string // three lines of English
	zh       string // a line of Chinese, which the voices cannot speak
	notImage string // text, named .png
	huge     string // a PNG of 20 Mpx, past the server's 16
}

// testImages renders the test's images (ocrtest, in Debian's fonts) into
// files, or skips the test if it cannot.
func testImages(t *testing.T) imageFiles {
	t.Helper()
	doc, err := ocrtest.Document("The train leaves at nine.", "Bring a warm coat.", "The museum opens at ten.")
	if err != nil {
		testdeps.Missing(t, "rendering the test images (scripts/install-deps.sh installs the fonts): %v", err)
	}
	zh, err := ocrtest.Set(ocrtest.SetOptions{Seed: 7, Chinese: 1})
	if err != nil {
		testdeps.Missing(t, "rendering the test images (scripts/install-deps.sh installs the fonts): %v", err)
	}
	var huge bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&huge, image.NewGray(image.Rect(0, 0, 5000, 4000))); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return imageFiles{
		doc:      write("page.png", doc.PNG),
		zh:       write("zh.png", zh[0].PNG),
		notImage: write("notes.png", []byte("hello, not an image\n")),
		huge:     write("huge.png", huge.Bytes()),
	}
}

// answer is what POST /v1/generate answers for an image, whole.
type answer struct {
	Text       string
	Regions    []region
	Timestamps []timedWord
	Notes      []struct {
		Stage   int    `json:"stage"`
		Message string `json:"message"`
	}
}

type region struct {
	Index     int           `json:"index"`
	Box       [4][2]float64 `json:"box"`
	Text      string        `json:"text"`
	CharStart int           `json:"char_start"`
	CharEnd   int           `json:"char_end"`
}

type timedWord struct {
	Word      string `json:"word"`
	CharStart int    `json:"char_start"`
	CharEnd   int    `json:"char_end"`
}

func (a answer) regionTexts() []string {
	var out []string
	for _, r := range a.Regions {
		out = append(out, r.Text)
	}
	return out
}

// words returns the words timed, in the text's order, as sliced from it.
func (a answer) words() []string {
	text := []rune(a.Text)
	var out []string
	for _, w := range a.sortedWords() {
		out = append(out, string(text[w.CharStart:w.CharEnd]))
	}
	return out
}

func (a answer) sortedWords() []timedWord {
	ws := slices.Clone(a.Timestamps)
	slices.SortStableFunc(ws, func(x, y timedWord) int { return x.CharStart - y.CharStart })
	return ws
}

func (a answer) region(index int) (region, bool) {
	i := slices.IndexFunc(a.Regions, func(r region) bool { return r.Index == index })
	if i < 0 {
		return region{}, false
	}
	return a.Regions[i], true
}

// spokenRegions returns the indexes of the regions whose words are
// spoken, in the order they are.
func (a answer) spokenRegions() []int {
	var out []int
	for _, w := range a.sortedWords() {
		for _, r := range a.Regions {
			if r.CharStart <= w.CharStart && w.CharEnd <= r.CharEnd && (len(out) == 0 || out[len(out)-1] != r.Index) {
				out = append(out, r.Index)
			}
		}
	}
	return out
}

// generate sends the image at path to model of s, as a multipart form,
// and returns the whole answer: every output the model gives.
func generate(t *testing.T, s *server, model, path string) answer {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	outputs := "text,regions"
	if model == "read-aloud" {
		outputs += ",audio,timestamps"
	}
	for _, f := range [][2]string{{"model", model}, {"output_modalities", outputs}} {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("file", filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(img)
	w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"v1/generate", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	var got struct {
		Outputs []struct {
			Modality   string      `json:"modality"`
			Text       string      `json:"text"`
			Regions    []region    `json:"regions"`
			Timestamps []timedWord `json:"timestamps"`
		} `json:"outputs"`
		Notes []struct {
			Stage   int    `json:"stage"`
			Message string `json:"message"`
		} `json:"notes"`
	}
	doJSON(t, req, &got)
	a := answer{Notes: got.Notes}
	for _, o := range got.Outputs {
		switch o.Modality {
		case "text":
			a.Text = o.Text
		case "regions":
			a.Regions = o.Regions
		case "timestamps":
			a.Timestamps = o.Timestamps
		}
	}
	if len(a.Regions) == 0 || a.Text == "" {
		t.Fatalf("%s read nothing in %s: %+v", model, path, got)
	}
	return a
}

// getJSON decodes the answer to GET url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	doJSON(t, req, v)
}

func doJSON(t *testing.T, req *http.Request, v any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, resp.StatusCode, b.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
}

// dragFiles drags the files at paths from outside the page and drops
// them at (x, y), through the browser's own drag and drop: the page gets
// the trusted drag events, with the files.
func dragFiles(x, y float64, paths ...string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		data := &input.DragData{Items: []*input.DragDataItem{}, Files: paths, DragOperationsMask: 1} // copy
		for _, typ := range []input.DispatchDragEventType{input.DispatchDragEventTypeDragEnter, input.DispatchDragEventTypeDragOver, input.DispatchDragEventTypeDrop} {
			if _, err := cdp.Call(ctx, t, input.DispatchDragEvent, input.DispatchDragEventParams{Type: typ, X: x, Y: y, Data: data}); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}
}
