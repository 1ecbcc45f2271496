package ppocr

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/ocrtest"
)

// system is one way of reading an image.
type system struct {
	name string
	// subsets are those it reads; all when nil.
	subsets []string
	// read returns the text of an image and the processor time it took.
	read func(ctx context.Context, s ocrtest.Sample) (string, time.Duration, error)
}

// TestReport reads the generated test set with det → cls → rec (the ocr
// pipeline) and det → rec (ocr-fast), with PaddleOCR's settings and tuned
// ones (see tuned; and det → rec growing boxes by other unclip ratios on
// the upright subsets), and with Tesseract 5, all on one thread, interleaved
// image by image in one run, and prints each one's character error rate
// and time per image for each subset: processor time (user and system),
// which the other work on a shared machine changes less than the wall
// time, printed beside it. It asserts nothing about the numbers: run it
// with -v to see them.
func TestReport(t *testing.T) {
	if testing.Short() {
		t.Skip("the OCR report reads the whole test set: a minute or more")
	}
	if raceEnabled {
		t.Skip("the race detector slows the Go code: the report's times would mean nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newReader(t)
	set, err := ocrtest.Set(ocrtest.SetOptions{Seed: 2026, English: 12, Rotated: 8, Chinese: 8})
	if err != nil {
		t.Skip(err)
	}
	for _, lang := range []string{"eng", "chi_sim"} {
		if err := (ocrtest.Tesseract{Lang: lang}).Available(ctx); err != nil {
			t.Skip(err)
		}
	}
	upright := []string{ocrtest.English, ocrtest.Chinese}
	systems := []system{
		{name: "det → cls → rec", read: ours(r, true)},
		{name: "det → rec (ocr-fast)", read: ours(r, false)},
		{name: "tuned det → cls → rec", read: ours(tuned(r), true)},
		{name: "tuned det → rec", read: ours(tuned(r), false)},
		{name: "det → rec, unclip_ratio 2.0", subsets: upright, read: ours(withUnclip(r, 2.0), false)},
		{name: "det → rec, unclip_ratio 3.0", subsets: upright, read: ours(withUnclip(r, 3.0), false)},
		{name: "Tesseract 5 (psm 3)", read: tesseract(3)},
		{name: "Tesseract 5 (psm 1: OSD)", subsets: []string{ocrtest.Rotated}, read: tesseract(1)},
	}
	// Warm up: ONNX Runtime's first runs allocate, and the files
	// Tesseract loads are read once into the page cache.
	for _, sys := range systems {
		if _, _, err := sys.read(ctx, set[0]); err != nil {
			t.Fatalf("%s: %v", sys.name, err)
		}
	}
	var scores ocrtest.Scores
	startup := map[string]time.Duration{}
	for _, lang := range []string{"eng", "chi_sim"} {
		if startup[lang], err = (ocrtest.Tesseract{Lang: lang}).Startup(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range set {
		for _, sys := range systems {
			if sys.subsets != nil && !slices.Contains(sys.subsets, s.Subset) {
				continue
			}
			start := time.Now()
			got, cpu, err := sys.read(ctx, s)
			wall := time.Since(start)
			if err != nil {
				t.Fatalf("%s on %s: %v", sys.name, s.Name, err)
			}
			cer := scores.Add(sys.name, s, got, cpu, wall)
			if strings.HasPrefix(sys.name, "Tesseract") {
				scores.Startup(sys.name, s.Subset, startup[tessLang(s.Subset)])
			}
			t.Logf("%-24s %-50s CER %.3f %5.0f ms CPU %q", sys.name, s.Name, cer, ms(cpu), got)
		}
	}
	t.Logf("\nTesseract's start (its process and model; a blank 32×32 image read): eng %.0f ms CPU, chi_sim %.0f ms CPU. "+
		"Its times include it; the last column takes it out.\n\n%s", ms(startup["eng"]), ms(startup["chi_sim"]), scores.Table())
}

// ours reads with r, through the classifier or not, and measures the
// processor time of this process (ONNX Runtime and OpenCV run on the
// calling thread; the Go runtime's own threads are counted too).
func ours(r *reader, cls bool) func(context.Context, ocrtest.Sample) (string, time.Duration, error) {
	return func(_ context.Context, s ocrtest.Sample) (string, time.Duration, error) {
		before := ocrtest.ProcessCPU()
		regions, err := r.read(s.PNG, cls)
		return text(regions), ocrtest.ProcessCPU() - before, err
	}
}

// withUnclip returns r growing boxes by ratio, its other settings
// PaddleOCR's.
func withUnclip(r *reader, ratio float64) *reader {
	db := DefaultDBOptions()
	db.UnclipRatio = ratio
	return r.with(db, DefaultClsOptions(), paddleBatch)
}

func tesseract(psm int) func(context.Context, ocrtest.Sample) (string, time.Duration, error) {
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

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
