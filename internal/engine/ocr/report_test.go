package ocr_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// reader is one way of reading the test set's images.
type reader struct {
	name string
	// subsets are those it reads; all when nil.
	subsets []string
	// read returns an image's text and the processor time it took.
	read func(ctx context.Context, s ocrtest.Sample) (string, time.Duration, error)
}

// Reader names in the report's table.
const (
	readOCR     = "ocr (det → cls → rec)"
	readFast    = "ocr-fast (det → rec)"
	readUnclip3 = "ocr, det's unclip_ratio 3.0"
	readNoGap   = "ocr, rec's space_score 0"
	readTess    = "Tesseract 5 (psm 3)"
	readTessOSD = "Tesseract 5 (psm 1: OSD)"
)

// TestReport reads a generated test set (English, English turned 180°,
// Chinese; its seed is not the one the built-ins' settings were chosen on)
// through the built-in ocr and ocr-fast pipelines as the server runs them
// (the orchestrator, the shipped engines, one intra-op thread a stage),
// through ocr with its detector growing boxes more (unclip_ratio 3.0)
// and with its recognizer reading only the spaces its model wrote
// (space_score 0, PaddleOCR's decoding), and with Tesseract 5 on one thread (eng, chi_sim for Chinese; on the
// turned images also with its orientation detection), interleaved image
// by image in one run, and prints a Markdown table of each reader's
// character error rate and time per image by subset: processor time (user
// and system), which other work on a shared machine changes less than the
// wall time printed beside it. Tesseract's times include its start (a
// process and a model load per image), which the last column takes out.
// It asserts nothing about the numbers: run it with -v to see them.
//
//	go test -count=1 -run TestReport -v ./internal/engine/ocr/
func TestReport(t *testing.T) {
	if testing.Short() {
		t.Skip("the OCR report reads 40 images six ways: a minute or more")
	}
	if raceEnabled {
		t.Skip("the race detector slows the Go code: the report's times would mean nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, lang := range []string{"eng", "chi_sim"} {
		if err := (ocrtest.Tesseract{Lang: lang}).Available(ctx); err != nil {
			t.Skip(err)
		}
	}
	full, _ := startOCR(t, "ocr", "")
	fast, _ := startOCR(t, "ocr-fast", "")
	// The built-in ocr but for boxes grown more (2.5 there), which reads
	// more of the spaces in small text.
	unclip3, _ := startOCR(t, "ocr", "    - {id: 0, replicas: 1, max_inflight: 64, options: {unclip_ratio: 3.0}}\n"+
		"    - {id: 1, replicas: 1, max_inflight: 64, options: {windows: 4, page_vote: true}}\n    - {id: 2, replicas: 1, max_inflight: 64}\n")
	// The built-in ocr but for the spaces the recognizer's model scored
	// and did not write, left out.
	noGap, _ := startOCR(t, "ocr", "    - {id: 0, replicas: 1, max_inflight: 64, options: {unclip_ratio: 2.5}}\n"+
		"    - {id: 1, replicas: 1, max_inflight: 64, options: {windows: 4, page_vote: true}}\n"+
		"    - {id: 2, replicas: 1, max_inflight: 64, options: {space_score: 0}}\n")
	set, err := ocrtest.Set(ocrtest.SetOptions{Seed: 2027, English: 16, Rotated: 12, Chinese: 12})
	if err != nil {
		t.Skip(err)
	}
	readers := []reader{
		{name: readOCR, read: pipelineReader(full)},
		{name: readFast, read: pipelineReader(fast)},
		{name: readUnclip3, read: pipelineReader(unclip3)},
		{name: readNoGap, read: pipelineReader(noGap)},
		{name: readTess, read: tesseractReader(3)},
		{name: readTessOSD, subsets: []string{ocrtest.Rotated}, read: tesseractReader(1)},
	}
	// Warm up: ONNX Runtime's first runs of an input shape allocate, and
	// the files Tesseract loads are read once into the page cache.
	for _, r := range readers {
		if _, _, err := r.read(ctx, set[0]); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	startup := map[string]time.Duration{}
	for _, lang := range []string{"eng", "chi_sim"} {
		if startup[lang], err = (ocrtest.Tesseract{Lang: lang}).Startup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var scores ocrtest.Scores
	for _, s := range set {
		for _, r := range readers {
			if r.subsets != nil && !slices.Contains(r.subsets, s.Subset) {
				continue
			}
			start := time.Now()
			got, cpu, err := r.read(ctx, s)
			wall := time.Since(start)
			if err != nil {
				t.Fatalf("%s on %s: %v", r.name, s.Name, err)
			}
			cer := scores.Add(r.name, s, got, cpu, wall)
			if strings.HasPrefix(r.name, "Tesseract") {
				scores.Startup(r.name, s.Subset, startup[tessLang(s.Subset)])
			}
			t.Logf("%-24s %-50s CER %.3f %5.0f ms CPU %q", r.name, s.Name, cer, float64(cpu)/1e6, got)
		}
	}
	t.Logf("\nTesseract's start (a process and its model: a blank 32×32 image read): eng %.0f ms CPU, chi_sim %.0f ms CPU.\n\n%s\n%s",
		float64(startup["eng"])/1e6, float64(startup["chi_sim"])/1e6, scores.Table(), goals(&scores, startup))
}

// goals says, for each subset, whether ocr reads as well as Tesseract
// (its better mode on the turned images) and as fast, its start left
// out, and what the classifier is worth on the turned images.
func goals(sc *ocrtest.Scores, startup map[string]time.Duration) string {
	var b strings.Builder
	for _, sub := range []string{ocrtest.English, ocrtest.Rotated, ocrtest.Chinese} {
		cer, cpu, _, n := sc.Mean(readOCR, sub)
		if n == 0 {
			continue
		}
		peer := readTess
		tc, tcpu, _, _ := sc.Mean(readTess, sub)
		if oc, ocpu, _, m := sc.Mean(readTessOSD, sub); m > 0 && oc < tc {
			peer, tc, tcpu = readTessOSD, oc, ocpu
		}
		tnet := tcpu - startup[tessLang(sub)]
		fmt.Fprintf(&b, "%s: ocr CER %.3f vs %s %.3f (%s); CPU %.0f ms vs %.0f ms, %.0f ms less its start (%s)",
			sub, cer, peer, tc, verdict(cer <= tc), float64(cpu)/1e6, float64(tcpu)/1e6, float64(tnet)/1e6, verdict(cpu <= tnet))
		if fc, _, _, m := sc.Mean(readFast, sub); m > 0 {
			fmt.Fprintf(&b, "; ocr-fast CER %.3f", fc)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// pipelineReader reads with o, measuring the processor time of this
// process (ONNX Runtime computes on the threads of the calls; the Go
// runtime's own threads are counted too).
func pipelineReader(o *orchestrator.Orchestrator) func(context.Context, ocrtest.Sample) (string, time.Duration, error) {
	return func(ctx context.Context, s ocrtest.Sample) (string, time.Duration, error) {
		before := ocrtest.ProcessCPU()
		got, err := read(ctx, o, s.PNG)
		return got, ocrtest.ProcessCPU() - before, err
	}
}

func tesseractReader(psm int) func(context.Context, ocrtest.Sample) (string, time.Duration, error) {
	return func(ctx context.Context, s ocrtest.Sample) (string, time.Duration, error) {
		res, err := ocrtest.Tesseract{Lang: tessLang(s.Subset), PSM: psm}.Read(ctx, s.PNG)
		return res.Text, res.CPU, err
	}
}

func tessLang(subset string) string {
	if subset == ocrtest.Chinese {
		return "chi_sim"
	}
	return "eng"
}
