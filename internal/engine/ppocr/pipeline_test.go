package ppocr

// The OCR pipeline, det → cls → rec, put together from this package's
// functions and the models, for the end-to-end tests.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
)

// paddleBatch is PaddleOCR's cls_batch_num and rec_batch_num.
const paddleBatch = 6

// reader reads images with the models.
type reader struct {
	det, cls, rec *model
	dict          *Dict
	// The stages' settings: PaddleOCR's unless a test changes them.
	detOpts DetOptions
	dbOpts  DBOptions
	clsOpts ClsOptions
	recOpts RecOptions
	// batch is how many crops the classifier and the recognizer take at
	// once.
	batch int
}

func newReader(t testing.TB) *reader {
	t.Helper()
	r := &reader{
		det: loadModel(t, detModel), cls: loadModel(t, clsModel), rec: loadModel(t, recModel),
		detOpts: DefaultDetOptions(), dbOpts: DefaultDBOptions(), clsOpts: DefaultClsOptions(), recOpts: DefaultRecOptions(),
		batch: paddleBatch,
	}
	var err error
	if r.dict, err = LoadDict(keysFile); err != nil {
		t.Fatal(err)
	}
	return r
}

// with returns a reader of the same models with other settings.
func (r *reader) with(db DBOptions, cls ClsOptions, batch int) *reader {
	c := *r
	c.dbOpts, c.clsOpts, c.batch = db, cls, batch
	return &c
}

// read returns the text regions of the image file b, in reading order;
// with useCls, upside-down lines are turned first (the ocr pipeline),
// without, not (ocr-fast).
func (r *reader) read(b []byte, useCls bool) ([]engine.Region, error) {
	img, err := imaging.Decode(b, imaging.DefaultLimits)
	if err != nil {
		return nil, err
	}
	in, err := r.detOpts.Input(img)
	if err != nil {
		return nil, err
	}
	prob, shape, err := r.det.run(in.Tensor, 1, 3, int64(in.Height), int64(in.Width))
	if err != nil {
		return nil, fmt.Errorf("det: %w", err)
	}
	if !slices.Equal(shape, []int64{1, 1, int64(in.Height), int64(in.Width)}) {
		return nil, fmt.Errorf("det: output shape %v for input %d×%d", shape, in.Width, in.Height)
	}
	boxes, err := r.dbOpts.Detect(prob, in.Width, in.Height, img.Width, img.Height)
	if err != nil {
		return nil, err
	}
	regions, err := Regions(img, boxes)
	if err != nil {
		return nil, err
	}
	out := regions.Regions
	if useCls {
		if err := r.classify(out); err != nil {
			return nil, err
		}
		PageOrder(out, img.Width, img.Height)
	}
	return r.recognize(out)
}

// batches calls f with the regions in batches of size, narrowest first.
func batches(regions []engine.Region, size int, f func(batch []engine.Region) error) error {
	crops := make([]*engine.Crop, len(regions))
	for i := range regions {
		crops[i] = regions[i].Crop
	}
	order := ByWidth(crops)
	for start := 0; start < len(order); start += size {
		var batch []engine.Region
		for _, i := range order[start:min(start+size, len(order))] {
			batch = append(batch, regions[i])
		}
		if err := f(batch); err != nil {
			return err
		}
	}
	return nil
}

func cropsOf(batch []engine.Region) []*engine.Crop {
	crops := make([]*engine.Crop, len(batch))
	for i := range batch {
		crops[i] = batch[i].Crop
	}
	return crops
}

// classify turns the upside-down regions' crops, in place.
func (r *reader) classify(regions []engine.Region) error {
	scores := make([]float32, 2*len(regions))
	err := batches(regions, r.batch, func(batch []engine.Region) error {
		in, err := r.clsOpts.Input(cropsOf(batch))
		if err != nil {
			return err
		}
		probs, _, err := r.cls.run(in.Tensor, int64(in.Rows), 3, ClsHeight, ClsWidth)
		if err != nil {
			return fmt.Errorf("cls: %w", err)
		}
		s, err := in.Scores(probs)
		if err != nil {
			return err
		}
		for i, b := range batch {
			copy(scores[2*b.Index:], s[2*i:2*i+2])
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.clsOpts.Apply(regions, scores)
}

// recognize reads the regions and returns those kept, in reading order.
func (r *reader) recognize(regions []engine.Region) ([]engine.Region, error) {
	var kept []engine.Region
	err := batches(regions, r.batch, func(batch []engine.Region) error {
		in, w, err := RecInput(cropsOf(batch))
		if err != nil {
			return err
		}
		probs, shape, err := r.rec.run(in, int64(len(batch)), 3, RecHeight, int64(w))
		if err != nil {
			return fmt.Errorf("rec: %w", err)
		}
		if len(shape) != 3 || shape[2] != int64(r.dict.Classes()) {
			return fmt.Errorf("rec: output shape %v; want [%d T %d]", shape, len(batch), r.dict.Classes())
		}
		got, err := r.recOpts.ApplyRec(r.dict, batch, probs, int(shape[1]))
		kept = append(kept, got...)
		return err
	})
	slices.SortFunc(kept, func(a, b engine.Region) int { return a.Index - b.Index })
	return kept, err
}

// text is the regions' lines, one a line.
func text(regions []engine.Region) string {
	lines := make([]string, len(regions))
	for i, r := range regions {
		lines[i] = r.Text
	}
	return strings.Join(lines, "\n")
}
