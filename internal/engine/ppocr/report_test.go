package ppocr

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"slices"
	"strings"
	"syscall"
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

// tally is a system's results on one subset.
type tally struct {
	cer, cerNoSpace float64
	wall, cpu       time.Duration
	n               int
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
	startup := tesseractStartup(ctx, t)

	results := map[string]map[string]*tally{}
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
			if results[sys.name] == nil {
				results[sys.name] = map[string]*tally{}
			}
			tl := results[sys.name][s.Subset]
			if tl == nil {
				tl = &tally{}
				results[sys.name][s.Subset] = tl
			}
			cer := ocrtest.CER(s.Text, got)
			tl.cer += cer
			tl.cerNoSpace += ocrtest.CER(noSpace(s.Text), noSpace(got))
			tl.wall += wall
			tl.cpu += cpu
			tl.n++
			t.Logf("%-24s %-50s CER %.3f %5.0f ms CPU %q", sys.name, s.Name, cer, ms(cpu), got)
		}
	}
	t.Log(table(systems, results, startup))
}

// table writes the report's table.
func table(systems []system, results map[string]map[string]*tally, startup map[string]time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nTesseract's start (its process and model; a blank 32×32 image read): eng %.0f ms CPU, chi_sim %.0f ms CPU. "+
		"Its times include it; the last column takes it out.\n\n", ms(startup["eng"]), ms(startup["chi_sim"]))
	fmt.Fprintf(&b, "| subset | images | reader | CER | CER without spaces | CPU ms per image | wall ms per image | CPU ms less Tesseract's start |\n|---|---|---|---|---|---|---|---|\n")
	for _, sub := range []string{ocrtest.English, ocrtest.Rotated, ocrtest.Chinese} {
		for _, sys := range systems {
			tl := results[sys.name][sub]
			if tl == nil {
				continue
			}
			n := float64(tl.n)
			net := ""
			if strings.HasPrefix(sys.name, "Tesseract") {
				net = fmt.Sprintf("%.0f", ms(tl.cpu)/n-ms(startup[tessLang(sub)]))
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.3f | %.3f | %.0f | %.0f | %s |\n",
				sub, tl.n, sys.name, tl.cer/n, tl.cerNoSpace/n, ms(tl.cpu)/n, ms(tl.wall)/n, net)
		}
	}
	return b.String()
}

// ours reads with r, through the classifier or not, and measures the
// processor time of this process (ONNX Runtime and OpenCV run on the
// calling thread; the Go runtime's own threads are counted too).
func ours(r *reader, cls bool) func(context.Context, ocrtest.Sample) (string, time.Duration, error) {
	return func(_ context.Context, s ocrtest.Sample) (string, time.Duration, error) {
		before := processCPU()
		regions, err := r.read(s.PNG, cls)
		return text(regions), processCPU() - before, err
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

// processCPU returns the processor time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tesseractStartup returns the processor time Tesseract takes to read a
// blank image, for each language: mostly its start and model load, which
// a server would pay once. The median of three runs.
func tesseractStartup(ctx context.Context, t *testing.T) map[string]time.Duration {
	var blank bytes.Buffer
	m := image.NewGray(image.Rect(0, 0, 32, 32))
	for i := range m.Pix {
		m.Pix[i] = 255
	}
	if err := png.Encode(&blank, m); err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, lang := range []string{"eng", "chi_sim"} {
		var runs []time.Duration
		for range 3 {
			res, err := ocrtest.Tesseract{Lang: lang}.Read(ctx, blank.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, res.CPU)
		}
		slices.Sort(runs)
		out[lang] = runs[1]
	}
	return out
}

func noSpace(s string) string {
	return strings.Join(strings.Fields(s), "")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
