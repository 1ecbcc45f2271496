package ocr

// ppocr-rec: the text of each region.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/ppocr"
	"github.com/omnistage/omnistage/internal/onnx"
)

// recOptions are ppocr-rec's deploy options: the model's, its character
// list, and the recognizer's settings (ppocr.RecOptions) under
// PaddleOCR's names where it has them. drop_score (PaddleOCR's 0.5) is
// the least mean confidence of a line for it to be kept. space_score
// (ppocr.GapSpaceScore, 0.02, by default; 0 turns it off, as in
// PaddleOCR) reads a space between two letters, digits or signs that are
// not CJK where the model left only blanks but scored the space class at
// least this much: the model drops many narrow spaces between English
// words (see ppocr.RecOptions.SpaceScore). Such a space's confidence is
// that score, and the line's mean confidence leaves it out.
type recOptions struct {
	modelOptions
	// Keys is the model's character list (ppocr_keys_v1.txt beside it).
	Keys       string  `json:"keys"`
	DropScore  float32 `json:"drop_score"`
	SpaceScore float32 `json:"space_score"`
}

func decodeRec(o engine.Options) (recOptions, ppocr.RecOptions, error) {
	v := recOptions{DropScore: ppocr.DefaultRecOptions().DropScore, SpaceScore: ppocr.GapSpaceScore}
	if err := o.Decode(&v); err != nil {
		return v, ppocr.RecOptions{}, err
	}
	rec := ppocr.RecOptions{DropScore: v.DropScore, SpaceScore: v.SpaceScore}
	return v, rec, rec.Check()
}

// Rec is a replica of ppocr-rec.
type Rec struct {
	opts  recOptions
	rec   ppocr.RecOptions
	dict  *ppocr.Dict
	model *onnx.Session
}

var (
	_ engine.Engine  = (*Rec)(nil)
	_ engine.Batcher = (*Rec)(nil)
)

func newRec(spec engine.Spec) (engine.Engine, error) {
	v, rec, err := decodeRec(spec.Options)
	if err != nil {
		return nil, err
	}
	return &Rec{opts: v, rec: rec}, nil
}

// Warm implements engine.Engine: it reads the character list and opens
// the model, whose classes must be the list's.
func (r *Rec) Warm(ctx context.Context) error {
	keys := modelPath(r.opts.Keys, KeysFile)
	if err := checkFile(keys); err != nil {
		return err
	}
	d, err := ppocr.LoadDict(keys)
	if err != nil {
		return err
	}
	m, err := openModel(modelPath(r.opts.Model, RecFile), r.opts.Options, []int64{-1, 3, ppocr.RecHeight, -1})
	if err != nil {
		return err
	}
	if out := m.Outputs()[0].Shape; len(out) != 3 || out[2] != int64(d.Classes()) {
		_ = m.Close()
		return fmt.Errorf("model %s outputs %v, not [N steps %d] for the %d classes of %s", m.Path(), out, d.Classes(), d.Classes(), keys)
	}
	r.dict, r.model = d, m
	return nil
}

// Process implements engine.Engine: each chunk of regions in, the regions
// read out, their crops dropped, in groups as they are read (the first
// line alone, then groups twice as large as the one before).
func (r *Rec) Process(ctx context.Context, job *engine.Job) error {
	for {
		in, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if in.Regions == nil {
			return &engine.InputError{Reason: fmt.Sprintf("ppocr-rec reads regions, not %s", in.Kind())}
		}
		if err := r.read(ctx, in.Regions, job.Out); err != nil {
			return err
		}
	}
}

// read reads the regions of rs and sends them as they are read.
func (r *Rec) read(ctx context.Context, rs *engine.Regions, out engine.Sink) error {
	for _, reg := range rs.Regions {
		if err := checkCrop(reg); err != nil {
			return err
		}
	}
	if len(rs.Regions) == 0 {
		return out.Send(ctx, engine.Chunk{Regions: &engine.Regions{Width: rs.Width, Height: rs.Height}})
	}
	for start, n := 0, 1; start < len(rs.Regions); start, n = start+n, 2*n {
		group := slices.Clone(rs.Regions[start:min(start+n, len(rs.Regions))])
		items := make([]*engine.BatchItem, len(group))
		for i, reg := range group {
			items[i] = &engine.BatchItem{Input: reg.Crop, Size: ppocr.RecBucketWidth(reg.Crop)}
		}
		if err := engine.RunBatched(ctx, r, items); err != nil {
			return err
		}
		kept := group[:0]
		for i, it := range items {
			if it.Err != nil {
				return it.Err
			}
			line := it.Output.(ppocr.Line)
			if line.Score < r.rec.DropScore {
				continue
			}
			reg := group[i]
			reg.Text, reg.Confidence, reg.Crop = line.Text, line.Confidence, nil
			kept = append(kept, reg)
		}
		if len(kept) == 0 {
			continue
		}
		if err := out.Send(ctx, engine.Chunk{Regions: &engine.Regions{Width: rs.Width, Height: rs.Height, Regions: kept}}); err != nil {
			return err
		}
	}
	return nil
}

// RunBatch implements engine.Batcher: a crop is one item, its output its
// line (ppocr.Line); crops of one input width (their Size) run together,
// a few at a time (recRuns).
func (r *Rec) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	for _, run := range recRuns(items) {
		if err := r.runWidth(ctx, run, run[0].Size); err != nil {
			return err
		}
	}
	return nil
}

// recRunRows returns how many crops of input width w the recognizer runs
// at once: two up to 640 wide, one when wider. On a CPU its time per crop
// grows in larger runs (BenchmarkRecRows, one intra-op thread: in runs of
// 2 crops it is the time alone up to 640 wide, 1.05 times at 1024; in
// runs of 4, 1.06 to 1.08 times up to 640 and 1.28 times at 1024; in runs
// of 8, 1.08 times at 320, 1.38 at 640 and 1.43 at 1024), so a batch
// computes fastest cut into runs this small.
func recRunRows(w int) int {
	if w <= 640 {
		return 2
	}
	return 1
}

// recRuns cuts items into the recognizer's runs: the items of one input
// width (their Size) in their order, recRunRows of them at a time, the
// widths in the order they first come.
func recRuns(items []*engine.BatchItem) [][]*engine.BatchItem {
	var runs [][]*engine.BatchItem
	for len(items) > 0 {
		w := items[0].Size
		var group, rest []*engine.BatchItem
		for _, it := range items {
			if it.Size == w {
				group = append(group, it)
			} else {
				rest = append(rest, it)
			}
		}
		n := recRunRows(w)
		for len(group) > 0 {
			k := min(n, len(group))
			runs = append(runs, group[:k:k])
			group = group[k:]
		}
		items = rest
	}
	return runs
}

// runWidth reads items whose crops are padded to width w, in one run.
func (r *Rec) runWidth(ctx context.Context, items []*engine.BatchItem, w int) error {
	crops := make([]*engine.Crop, len(items))
	for i, it := range items {
		crops[i] = it.Input.(*engine.Crop)
	}
	t, err := ppocr.RecInputWidth(crops, w)
	if err != nil {
		return err
	}
	probs, out, err := runModel(ctx, r.model, t, []int64{int64(len(items)), 3, ppocr.RecHeight, int64(w)})
	if err != nil {
		return err
	}
	defer onnx.Recycle([]engine.Tensor{out})
	if len(out.Shape) != 3 || out.Shape[0] != int64(len(items)) {
		return fmt.Errorf("model %s: output of shape %v for %d crops", r.model.Path(), out.Shape, len(items))
	}
	steps := int(out.Shape[1])
	per := steps * r.dict.Classes()
	for i, it := range items {
		line, err := r.rec.Decode(r.dict, probs[i*per:(i+1)*per], steps)
		if err != nil {
			return err
		}
		it.Output = line
	}
	return nil
}

// Close implements engine.Engine.
func (r *Rec) Close() error {
	if r.model == nil {
		return nil
	}
	return r.model.Close()
}
