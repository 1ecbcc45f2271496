package acceptance

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine/ocr"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/onnx"
	"github.com/omnistage/omnistage/internal/testdeps"
	"github.com/omnistage/omnistage/internal/testkit"
)

// TestOCRBatchedReadsAlike reads the lines of a handful of generated
// images with the recognizer (ppocr-rec, stage 2 of ocr-fast) unbatched
// (max_batch 1) and batched (max_batch 8, waiting up to 50ms so that the
// concurrent requests surely share batches), each in process, in a worker
// process (placement process) and on a stage server (omnistage serve
// --stage 2, placement remote), every image's stage 2 twice at once: each
// reading is the in-process unbatched one, the same text and each
// character's confidence within 1e-4. The batched stages did run batches
// of more than one crop.
func TestOCRBatchedReadsAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and two workers with the OCR models")
	}
	ocrInstalled(t)
	set, err := ocrtest.Set(ocrtest.SetOptions{Seed: 13, English: 4, Chinese: 2})
	if err != nil {
		testdeps.Missing(t, "%v", err)
	}
	batching := map[int]string{1: "max_batch: 1", 8: "max_batch: 8, max_batch_delay: 50ms"}
	var args []string
	stageServers := map[string]*server{}
	var names []string
	for _, b := range []int{1, 8} {
		name := fmt.Sprintf("inproc-b%d", b)
		args = append(args, "--config", writeFile(t, name+".yaml", ocrWith(t, name, batching[b])))
		names = append(names, name)
		name = fmt.Sprintf("process-b%d", b)
		args = append(args, "--config", writeFile(t, name+".yaml", ocrWith(t, name, "placement: process, "+batching[b])))
		names = append(names, name)
		name = fmt.Sprintf("remote-b%d", b)
		stageServers[name] = serve(t, "--stage", "2", "--config", writeFile(t, name+"-stage.yaml", ocrWith(t, name, batching[b])))
		args = append(args, "--config", writeFile(t, name+".yaml", ocrWith(t, name, fmt.Sprintf("placement: remote, endpoints: [%q]", stageServers[name].url))))
		names = append(names, name)
	}
	front := serve(t, args...)

	// Each pipeline's stage 0 finds the regions; stage 2's calls then all
	// go at once, every image twice.
	read := map[string][][]apijson.Region{} // by pipeline, then call
	for _, name := range names {
		var payloads []string
		for _, s := range set {
			ans := runStage(t, front.url, name, map[string]any{"stage_id": 0, "stage_input": map[string]any{"image": base64.StdEncoding.EncodeToString(s.PNG)},
				"output_modalities": []string{"regions"}})
			if ans.Finished || ans.StageID != 2 || ans.StageInput == "" {
				t.Fatalf("%s: %s: stage 0 answered stage %d, finished %v", name, s.Name, ans.StageID, ans.Finished)
			}
			payloads = append(payloads, ans.StageInput)
		}
		payloads = append(payloads, payloads...)
		calls := make([][]apijson.Region, len(payloads))
		var wg sync.WaitGroup
		for i, p := range payloads {
			wg.Go(func() {
				ans := runStage(t, front.url, name, map[string]any{"stage_id": 2, "stage_input": p})
				if !ans.Finished || ans.Output == nil {
					t.Errorf("%s: %s: stage 2 answered %+v", name, set[i%len(set)].Name, ans)
					return
				}
				calls[i] = ans.Output.Regions
			})
		}
		wg.Wait()
		read[name] = calls
	}
	if t.Failed() {
		return
	}
	want := read["inproc-b1"]
	var lines int
	var most float64
	for _, name := range names {
		for i, got := range read[name] {
			s := set[i%len(set)]
			w := want[i%len(set)]
			if len(got) != len(w) {
				t.Errorf("%s: %s: %d regions, want %d", name, s.Name, len(got), len(w))
				continue
			}
			for k := range got {
				d, why := sameLine(got[k], w[k])
				if why != "" {
					t.Errorf("%s: %s: region %d: %s", name, s.Name, k, why)
				}
				most = max(most, d)
				lines++
			}
		}
	}
	t.Logf("%d lines read alike in %d pipelines; confidences at most %.2g apart", lines, len(names), most)
	if got := ocrtest.CER(set[0].Text, joinText(want[0])); got > 0.05 {
		t.Errorf("%s read as %q (CER %.3f): not a reading worth comparing", set[0].Name, joinText(want[0]), got)
	}

	// The batched stages ran batches of more than one crop; the unbatched
	// ones ran none (each call's crops computed in its own calls).
	for name, batched := range map[string]bool{"inproc-b1": false, "inproc-b8": true} {
		checkBatches(t, name, front.url, "", batched)
	}
	for name, batched := range map[string]bool{"remote-b1": false, "remote-b8": true} {
		checkBatches(t, name, stageServers[name].url, "", batched)
	}
	seen := map[string]bool{}
	for _, w := range front.allWorkers(t) {
		for _, name := range []string{"process-b1", "process-b8"} {
			if strings.Contains(metricsText(t, w.url, w.key), fmt.Sprintf("pipeline=%q", name)) {
				checkBatches(t, name, w.url, w.key, name == "process-b8")
				seen[name] = true
			}
		}
	}
	if len(seen) != 2 {
		t.Errorf("found the workers of %v, want both process pipelines'", seen)
	}
}

// ocrInstalled skips the test when ONNX Runtime's library or the PP-OCRv4
// models are not installed.
func ocrInstalled(t *testing.T) {
	t.Helper()
	dir := cmp.Or(os.Getenv(ocr.ModelsEnv), ocr.DefaultModels)
	for _, f := range []string{onnx.LibraryPath(""), filepath.Join(dir, ocr.DetFile), filepath.Join(dir, ocr.RecFile), filepath.Join(dir, ocr.KeysFile)} {
		if _, err := os.Stat(f); err != nil {
			testdeps.Missing(t, "%v (scripts/install-deps.sh installs ONNX Runtime and the PP-OCRv4 models)", err)
		}
	}
}

// ocrWith is the built-in ocr-fast pipeline (det → rec) named name, its
// recognizer's deploy entry taking the keys rec (YAML: "max_batch: 8").
func ocrWith(t *testing.T, name, rec string) string {
	t.Helper()
	yaml := testkit.BuiltinWith(t, "ocr-fast", "    - {id: 0, options: {unclip_ratio: 2.5}}\n    - {id: 1}\n    - {id: 2, max_inflight: 64, "+rec+"}\n")
	if !strings.Contains(yaml, "name: ocr-fast\n") {
		t.Fatal("the built-in ocr-fast pipeline is no longer named so")
	}
	return strings.Replace(yaml, "name: ocr-fast\n", "name: "+name+"\n", 1)
}

// runStage posts a one-shot /v1/run call to pipeline name at url and
// returns its answer; unless it is a 200, the test fails (Errorf: it may
// run on a goroutine of its own) and the answer is empty.
func runStage(t *testing.T, url, name string, body map[string]any) hop.RunResponse {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/run?model="+name, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return hop.RunResponse{}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var ans hop.RunResponse
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/run?model=%s: %d %s", name, resp.StatusCode, data)
		return ans
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		t.Errorf("POST /v1/run?model=%s: %v: %s", name, err, data)
	}
	return ans
}

// sameLine returns how far apart two readings' confidences are at most,
// and what differs beyond 1e-4 between them, or "".
func sameLine(got, want apijson.Region) (float64, string) {
	if got.Text != want.Text || len(got.Confidence) != len(want.Confidence) {
		return 0, fmt.Sprintf("read %q (%d confidences), want %q (%d)", got.Text, len(got.Confidence), want.Text, len(want.Confidence))
	}
	var most float64
	for i := range got.Confidence {
		d := math.Abs(float64(got.Confidence[i]) - float64(want.Confidence[i]))
		if d > 1e-4 {
			return d, fmt.Sprintf("%q: confidence %d is %v, want %v", got.Text, i, got.Confidence[i], want.Confidence[i])
		}
		most = max(most, d)
	}
	return most, ""
}

func joinText(rs []apijson.Region) string {
	var lines []string
	for _, r := range rs {
		lines = append(lines, r.Text)
	}
	return strings.Join(lines, "\n")
}

// checkBatches checks that pipeline name's stage 2, whose server is url
// (bearer token key, if any), ran batches of more than one crop, or none.
func checkBatches(t *testing.T, name, url, key string, batched bool) {
	t.Helper()
	text := metricsText(t, url, key)
	series := fmt.Sprintf(`pipeline=%q,stage="2"`, name)
	count, ok := sumSamples(text, "omnistage_batch_size_count{"+series+"}")
	items, _ := sumSamples(text, "omnistage_batch_size_sum{"+series+"}")
	switch {
	case !batched && ok && count > 0:
		t.Errorf("%s: %v batches of %v crops, want none", name, count, items)
	case batched && !(count > 0 && items > count):
		t.Errorf("%s: %v batches of %v crops, want some of more than one", name, count, items)
	default:
		t.Logf("%s: %v batches of %v crops", name, count, items)
	}
}
