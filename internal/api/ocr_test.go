package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// ocrSamples are generated test images: English lines, and a page upside
// down.
var ocrSamples = sync.OnceValues(func() ([]ocrtest.Sample, error) {
	return ocrtest.Set(ocrtest.SetOptions{Seed: 7, English: 2, Rotated: 1})
})

func samples(t *testing.T) []ocrtest.Sample {
	t.Helper()
	s, err := ocrSamples()
	if err != nil {
		testdeps.Missing(t, "generating test images: %v", err)
	}
	return s
}

// TestOCRGenerate: the built-in ocr pipeline reads an image sent as
// base64, as a data: URL and as a multipart form's file, answering its
// text and its regions, each region's span pointing into the text.
func TestOCRGenerate(t *testing.T) {
	f := realFixture(t, "builtin:ocr", "")
	for _, s := range samples(t) {
		b64 := base64.StdEncoding.EncodeToString(s.PNG)
		for name, send := range map[string]func() (*http.Response, []byte){
			"base64": func() (*http.Response, []byte) {
				return f.do(context.Background(), http.MethodPost, "/v1/generate", map[string]any{"input": map[string]any{"image": b64}, "output_modalities": []string{"text", "regions"}})
			},
			"data URL": func() (*http.Response, []byte) {
				return f.do(context.Background(), http.MethodPost, "/v1/generate", map[string]any{"input": map[string]any{"image": "data:image/png;base64," + b64}, "output_modalities": []string{"text", "regions"}})
			},
			"multipart": func() (*http.Response, []byte) {
				ct, body := multipartBody(t, s.PNG, "output_modalities", "text,regions")
				return f.doBody(http.MethodPost, "/v1/generate", ct, body)
			},
		} {
			resp, body := send()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s: %d %s", s.Name, name, resp.StatusCode, body)
			}
			var got apijson.GenerateResponse
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Outputs) != 2 || got.Outputs[0].Modality != "text" || got.Outputs[1].Modality != "regions" {
				t.Fatalf("%s %s: outputs %s", s.Name, name, body)
			}
			text, regions := got.Outputs[0].Text, got.Outputs[1].Regions
			if cer := ocrtest.CER(s.Text, text); cer > 0.05 {
				t.Errorf("%s %s: read %q for %q (CER %.3f)", s.Name, name, text, s.Text, cer)
			}
			runes := []rune(text)
			for _, r := range regions {
				if r.CharEnd > len(runes) || string(runes[r.CharStart:r.CharEnd]) != r.Text {
					t.Errorf("%s: region %d %q spans [%d, %d) of %q", s.Name, r.Index, r.Text, r.CharStart, r.CharEnd, text)
				}
			}
		}
	}
}

// multipartBody returns a multipart form with the image as its file and
// the fields given as name, value pairs: its content type and body.
func multipartBody(t *testing.T, image []byte, fields ...string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	fw, err := w.CreateFormFile("file", "page.png")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(image)
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	w.Close()
	return w.FormDataContentType(), b.Bytes()
}

// doBody sends body of content type ct and reads the answer.
func (f *fixture) doBody(method, path, ct string, body []byte) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, b
}

// TestOCRBadImages: what is not an image, a truncated file, a text
// request, and an empty form are each a 400 that says what is wrong, and
// the pipeline serves the next request.
func TestOCRBadImages(t *testing.T) {
	f := realFixture(t, "builtin:ocr", "")
	good := samples(t)[0].PNG
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"not an image", map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString([]byte("hello, not an image"))}}, "image: not an image"},
		{"truncated", map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString(good[:len(good)/2])}}, "truncated"},
		{"not base64", map[string]any{"input": map[string]any{"image": "!!!"}}, "input.image is not base64"},
		{"text to an image pipeline", map[string]any{"input": "Hello"}, "pipeline ocr reads an image"},
		{"text and image", map[string]any{"input": map[string]any{"image": "aGk=", "text": "hi"}}, "both text and an image"},
		{"audio of text", map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString(good)}, "output_modalities": []string{"audio"}}, `no stage on the route produces output`},
	} {
		resp, body := f.do(context.Background(), http.MethodPost, "/v1/generate", tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s; want 400 saying %q", tc.name, resp.StatusCode, body, tc.want)
		}
	}
	for name, body := range map[string]string{"no file": "--x\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nocr\r\n--x--\r\n", "not a form": "hello"} {
		resp, b := f.doBody(http.MethodPost, "/v1/generate", "multipart/form-data; boundary=x", []byte(body))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	var got apijson.GenerateResponse
	f.post("/v1/generate", map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString(good)}}, &got)
	if len(got.Outputs) != 1 || got.Outputs[0].Modality != "regions" || len(got.Outputs[0].Regions) == 0 {
		t.Errorf("after the bad requests: %+v", got)
	}
}

// TestOCRRun: /v1/run drives det, cls and rec one call at a time, stage 0
// taking the image, each later stage the previous answer's payload, and
// the last answer is what /v1/generate answers.
func TestOCRRun(t *testing.T) {
	f := realFixture(t, "builtin:ocr", "")
	s := samples(t)[2] // upside down: the classifier must run
	var ans hop.RunResponse
	f.post("/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"image": base64.StdEncoding.EncodeToString(s.PNG)},
		"output_modalities": []string{"text", "regions"}}, &ans)
	for hops := 1; !ans.Finished; hops++ {
		if hops > 3 {
			t.Fatalf("still not finished after %d calls", hops)
		}
		next := ans.StageID
		f.post("/v1/run", map[string]any{"stage_id": next, "stage_input": ans.StageInput}, &ans)
	}
	if ans.StageID != 2 || ans.Output == nil || ocrtest.CER(s.Text, ans.Output.Text) > 0.05 || len(ans.Output.Regions) == 0 {
		t.Errorf("last answer: stage %d, %+v; want stage 2 reading %q", ans.StageID, ans.Output, s.Text)
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/run", map[string]any{"stage_id": 0, "stage_input": map[string]any{"text": "hi"}})
	wantError(t, resp, body, http.StatusBadRequest, "bad_request", "pipeline ocr reads an image")
}

// TestReadAloud: the read-aloud pipeline speaks an image's text with word
// timestamps whose offsets point into the recognized text, each inside
// one region's span; streamed, its first audio comes before the image's
// last line is read; text it cannot speak is skipped with a note.
func TestReadAloud(t *testing.T) {
	f := realFixture(t, "builtin:read-aloud", "")
	s := samples(t)[1] // three lines
	b64 := base64.StdEncoding.EncodeToString(s.PNG)
	var got apijson.GenerateResponse
	f.post("/v1/generate", map[string]any{"input": map[string]any{"image": b64}, "output_modalities": []string{"text", "regions", "audio", "timestamps"}}, &got)
	outs := map[string]apijson.Outputs{}
	for _, o := range got.Outputs {
		outs[o.Modality] = o.Outputs
	}
	text, regions, words := outs["text"].Text, outs["regions"].Regions, outs["timestamps"].Timestamps
	if a := outs["audio"].Audio; a == nil || a.DurationMs < 3000 || ocrtest.CER(s.Text, text) > 0.05 {
		t.Fatalf("text %q (want %q), audio %+v", text, s.Text, a)
	}
	runes := []rune(text)
	for _, w := range words {
		if w.CharEnd > len(runes) || string(runes[w.CharStart:w.CharEnd]) != w.Word {
			t.Errorf("word %+v is not text[%d:%d]", w, w.CharStart, w.CharEnd)
		}
		in := 0
		for _, r := range regions {
			if w.CharStart >= r.CharStart && w.CharEnd <= r.CharEnd {
				in++
			}
		}
		if in != 1 {
			t.Errorf("word %q lies in %d regions' spans", w.Word, in)
		}
	}
	if len(words) < 15 {
		t.Errorf("%d words timed for %q", len(words), text)
	}

	// Streamed, a page of six sentences: audio before the last lines are
	// read.
	page, err := ocrtest.Document("The train leaves at nine.", "Bring a warm coat.", "The museum opens at ten.",
		"Lunch is at noon.", "We walk back by the river.", "Dinner is at seven.")
	if err != nil {
		t.Fatal(err)
	}
	resp, body := f.do(context.Background(), http.MethodPost, "/v1/generate", map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString(page.PNG)},
		"output_modalities": []string{"regions", "audio"}, "stream": "ndjson"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("streamed: %d %s", resp.StatusCode, body)
	}
	firstAudio, lastRegions := -1, -1
	for i, ev := range readEvents(t, body, false) {
		switch ev.Modality {
		case "audio":
			if firstAudio < 0 {
				firstAudio = i
			}
		case "regions":
			lastRegions = i
		}
	}
	if firstAudio < 0 || firstAudio > lastRegions {
		t.Errorf("first audio event %d, last regions event %d: want audio before the last line is read", firstAudio, lastRegions)
	}

	// Chinese: read, not spoken, and said so.
	var zh []ocrtest.Sample
	zh, err = ocrtest.Set(ocrtest.SetOptions{Seed: 7, Chinese: 1})
	if err != nil {
		t.Fatal(err)
	}
	got = apijson.GenerateResponse{}
	f.post("/v1/generate", map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString(zh[0].PNG)}, "output_modalities": []string{"text", "audio"}}, &got)
	if len(got.Notes) == 0 || !strings.Contains(got.Notes[0].Message, "is not spoken") || got.Outputs[0].Text == "" {
		t.Errorf("Chinese image: %+v", got)
	}
}
