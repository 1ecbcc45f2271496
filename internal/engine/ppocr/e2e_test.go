package ppocr

import (
	"testing"

	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// tuned returns r with the settings that read the test set best (see
// TestReport): boxes grown more (unclip_ratio 2.5, which keeps the spaces
// between English words), the classifier looking along the whole line
// with the page's lines voting, the recognizer reading the spaces its
// model scored but did not write, and one crop at a time (at one thread
// a batch costs more than its crops alone: the narrower ones are padded).
func tuned(r *reader) *reader {
	db := DefaultDBOptions()
	db.UnclipRatio = 2.5
	cls := DefaultClsOptions()
	cls.Windows, cls.PageVote = 4, true
	t := r.with(db, cls, 1)
	t.recOpts.SpaceScore = GapSpaceScore
	return t
}

// gapSpaces returns r reading the spaces its model scored but did not
// write, its other settings PaddleOCR's.
func gapSpaces(r *reader) *reader {
	g := r.with(DefaultDBOptions(), DefaultClsOptions(), paddleBatch)
	g.recOpts.SpaceScore = GapSpaceScore
	return g
}

// TestEndToEnd reads generated images (English, English upside down,
// Chinese) through det → cls → rec with the PP-OCR models, with
// PaddleOCR's settings and tuned ones, and det → rec on the upside-down
// ones, and checks the character error rates.
func TestEndToEnd(t *testing.T) {
	r := newReader(t)
	set, err := ocrtest.Set(ocrtest.SetOptions{Seed: 11, English: 3, Rotated: 2, Chinese: 2})
	if err != nil {
		testdeps.Missing(t, "%v", err)
	}
	type run struct {
		name    string
		r       *reader
		cls     bool
		subsets map[string]bool
		// maxCER bounds the mean CER, with spaces and without.
		maxCER, maxNoSpace float64
		// minCER is the least mean CER: a reader that cannot read these.
		minCER float64
	}
	upright := map[string]bool{ocrtest.English: true, ocrtest.Chinese: true}
	rotated := map[string]bool{ocrtest.Rotated: true}
	runs := []run{
		// The English model drops spaces between words in tight boxes (a
		// known weakness of PP-OCRv4's rec: PaddleOCR issue 11386).
		{name: "paddle det → cls → rec", r: r, cls: true, subsets: upright, maxCER: 0.2, maxNoSpace: 0.03},
		{name: "paddle det → cls → rec", r: r, cls: true, subsets: rotated, maxCER: 0.4, maxNoSpace: 0.3},
		// Reading the spaces the model scored in the gaps recovers most
		// of them, even in PaddleOCR's tight boxes.
		{name: "paddle det → cls → rec, gap spaces", r: gapSpaces(r), cls: true, subsets: upright, maxCER: 0.015, maxNoSpace: 0.03},
		{name: "paddle det → cls → rec, gap spaces", r: gapSpaces(r), cls: true, subsets: rotated, maxCER: 0.02, maxNoSpace: 0.03},
		{name: "tuned det → cls → rec", r: tuned(r), cls: true, subsets: upright, maxCER: 0.05, maxNoSpace: 0.03},
		{name: "tuned det → cls → rec", r: tuned(r), cls: true, subsets: rotated, maxCER: 0.05, maxNoSpace: 0.03},
		// Without the classifier, upside-down text is not read.
		{name: "det → rec", r: r, subsets: rotated, maxCER: 2, maxNoSpace: 2, minCER: 0.5},
	}
	for _, rn := range runs {
		var cer, noSp, n float64
		for _, s := range set {
			if !rn.subsets[s.Subset] {
				continue
			}
			regions, err := rn.r.read(s.PNG, rn.cls)
			if err != nil {
				t.Fatalf("%s on %s: %v", rn.name, s.Name, err)
			}
			got := text(regions)
			c := ocrtest.CER(s.Text, got)
			t.Logf("%s on %s: CER %.3f %q", rn.name, s.Name, c, got)
			cer += c
			noSp += ocrtest.CERWithoutSpaces(s.Text, got)
			n++
		}
		cer, noSp = cer/n, noSp/n
		if cer > rn.maxCER || noSp > rn.maxNoSpace || cer < rn.minCER {
			t.Errorf("%s: mean CER %.3f (%.3f without spaces) over %v images; want %.2f to %.2f (at most %.2f without spaces)",
				rn.name, cer, noSp, n, rn.minCER, rn.maxCER, rn.maxNoSpace)
		}
	}
}
