package ocr

// ppocr-cls: upside-down lines turned upright.

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

// clsOptions are ppocr-cls's deploy options.
type clsOptions struct {
	modelOptions
	Thresh   float32 `json:"thresh"`
	Windows  int     `json:"windows"`
	PageVote bool    `json:"page_vote"`
}

func decodeCls(o engine.Options) (clsOptions, ppocr.ClsOptions, error) {
	def := ppocr.DefaultClsOptions()
	v := clsOptions{Thresh: def.Thresh, Windows: def.Windows, PageVote: def.PageVote}
	if err := o.Decode(&v); err != nil {
		return v, def, err
	}
	c := ppocr.ClsOptions{Thresh: v.Thresh, Windows: v.Windows, PageVote: v.PageVote}
	return v, c, c.Check()
}

// Cls is a replica of ppocr-cls.
type Cls struct {
	opts  clsOptions
	cls   ppocr.ClsOptions
	model *onnx.Session
}

var (
	_ engine.Engine  = (*Cls)(nil)
	_ engine.Batcher = (*Cls)(nil)
)

func newCls(spec engine.Spec) (engine.Engine, error) {
	v, c, err := decodeCls(spec.Options)
	if err != nil {
		return nil, err
	}
	return &Cls{opts: v, cls: c}, nil
}

// Warm implements engine.Engine: it opens the model.
func (c *Cls) Warm(ctx context.Context) (err error) {
	c.model, err = openModel(modelPath(c.opts.Model, ClsFile), c.opts.Options, []int64{-1, 3, ppocr.ClsHeight, ppocr.ClsWidth})
	return err
}

// Process implements engine.Engine: each chunk of an image's regions in,
// the same regions out, the upside-down ones turned, in the page's
// reading order.
func (c *Cls) Process(ctx context.Context, job *engine.Job) error {
	for {
		in, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if in.Regions == nil {
			return &engine.InputError{Reason: fmt.Sprintf("ppocr-cls reads regions, not %s", in.Kind())}
		}
		out := *in.Regions
		out.Regions = slices.Clone(out.Regions)
		if err := c.classify(ctx, &out); err != nil {
			return err
		}
		if err := job.Out.Send(ctx, engine.Chunk{Regions: &out}); err != nil {
			return err
		}
	}
}

// classify turns rs's upside-down regions, their crops classified in
// batches.
func (c *Cls) classify(ctx context.Context, rs *engine.Regions) error {
	items := make([]*engine.BatchItem, len(rs.Regions))
	for i, r := range rs.Regions {
		if err := checkCrop(r); err != nil {
			return err
		}
		items[i] = &engine.BatchItem{Input: r.Crop}
	}
	if err := engine.RunBatched(ctx, c, items); err != nil {
		return err
	}
	scores := make([]float32, 0, 2*len(items))
	for _, it := range items {
		if it.Err != nil {
			return it.Err
		}
		scores = append(scores, it.Output.([]float32)...)
	}
	if err := c.cls.Apply(rs.Regions, scores); err != nil {
		return err
	}
	ppocr.PageOrder(rs.Regions, rs.Width, rs.Height)
	return nil
}

// RunBatch implements engine.Batcher: a crop is one item, its output its
// 0° and 180° scores.
func (c *Cls) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	crops := make([]*engine.Crop, len(items))
	for i, it := range items {
		crops[i] = it.Input.(*engine.Crop)
	}
	b, err := c.cls.Input(crops)
	if err != nil {
		return err
	}
	probs, out, err := runModel(ctx, c.model, b.Tensor, []int64{int64(b.Rows), 3, ppocr.ClsHeight, ppocr.ClsWidth})
	if err != nil {
		return err
	}
	defer onnx.Recycle([]engine.Tensor{out})
	scores, err := b.Scores(probs)
	if err != nil {
		return err
	}
	for i, it := range items {
		it.Output = slices.Clone(scores[2*i : 2*i+2])
	}
	return nil
}

// Close implements engine.Engine.
func (c *Cls) Close() error {
	if c.model == nil {
		return nil
	}
	return c.model.Close()
}

// checkCrop refuses a region a classifier or recognizer cannot read.
func checkCrop(r engine.Region) error {
	c := r.Crop
	switch {
	case c == nil:
		return &engine.InputError{Reason: fmt.Sprintf("region %d has no crop to read (was it read already?)", r.Index)}
	case c.Width < 1 || c.Height < 1 || len(c.Pixels) != 3*c.Width*c.Height:
		return &engine.InputError{Reason: fmt.Sprintf("region %d's crop of %d×%d pixels has %d bytes, not 3 a pixel", r.Index, c.Width, c.Height, len(c.Pixels))}
	}
	return nil
}
