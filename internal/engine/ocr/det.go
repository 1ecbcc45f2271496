package ocr

// ppocr-det: an image's text regions.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/ppocr"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/onnx"
)

// detOptions are ppocr-det's deploy options: PaddleOCR's detection
// settings under its names, the image limits, and the model's.
type detOptions struct {
	modelOptions
	LimitSideLen  int     `json:"limit_side_len"`
	LimitType     string  `json:"limit_type"`
	Thresh        float32 `json:"thresh"`
	BoxThresh     float32 `json:"box_thresh"`
	MaxCandidates int     `json:"max_candidates"`
	UnclipRatio   float64 `json:"unclip_ratio"`
	MinSize       float32 `json:"min_size"`
	ScoreMode     string  `json:"score_mode"`
	UseDilation   bool    `json:"use_dilation"`
	MaxImageBytes int     `json:"max_image_bytes"`
	MaxPixels     int     `json:"max_pixels"`
}

func decodeDet(o engine.Options) (detOptions, ppocr.DetOptions, ppocr.DBOptions, imaging.Limits, error) {
	det, db, lim := ppocr.DefaultDetOptions(), ppocr.DefaultDBOptions(), imaging.DefaultLimits
	v := detOptions{LimitSideLen: det.LimitSideLen, LimitType: det.LimitType, Thresh: db.Thresh, BoxThresh: db.BoxThresh,
		MaxCandidates: db.MaxCandidates, UnclipRatio: db.UnclipRatio, MinSize: db.MinSize, ScoreMode: db.ScoreMode,
		UseDilation: db.UseDilation, MaxImageBytes: lim.MaxBytes, MaxPixels: lim.MaxPixels}
	if err := o.Decode(&v); err != nil {
		return v, det, db, lim, err
	}
	det = ppocr.DetOptions{LimitSideLen: v.LimitSideLen, LimitType: v.LimitType}
	db = ppocr.DBOptions{Thresh: v.Thresh, BoxThresh: v.BoxThresh, MaxCandidates: v.MaxCandidates, UnclipRatio: v.UnclipRatio,
		MinSize: v.MinSize, ScoreMode: v.ScoreMode, UseDilation: v.UseDilation}
	lim = imaging.Limits{MaxBytes: v.MaxImageBytes, MaxPixels: v.MaxPixels}
	if lim.MaxBytes < 1 || lim.MaxPixels < 1 {
		return v, det, db, lim, fmt.Errorf("max_image_bytes %d and max_pixels %d: want at least 1 each", lim.MaxBytes, lim.MaxPixels)
	}
	return v, det, db, lim, errors.Join(det.Check(), db.Check())
}

// Det is a replica of ppocr-det.
type Det struct {
	opts  detOptions
	det   ppocr.DetOptions
	db    ppocr.DBOptions
	lim   imaging.Limits
	model *onnx.Session
}

var _ engine.Engine = (*Det)(nil)

func newDet(spec engine.Spec) (engine.Engine, error) {
	v, det, db, lim, err := decodeDet(spec.Options)
	if err != nil {
		return nil, err
	}
	return &Det{opts: v, det: det, db: db, lim: lim}, nil
}

// Warm implements engine.Engine: it opens the model.
func (d *Det) Warm(ctx context.Context) (err error) {
	d.model, err = openModel(modelPath(d.opts.Model, DetFile), d.opts.Options, []int64{-1, 3, -1, -1})
	return err
}

// Process implements engine.Engine: each image in, its regions out.
func (d *Det) Process(ctx context.Context, job *engine.Job) error {
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if c.Image == nil {
			return &engine.InputError{Reason: fmt.Sprintf("ppocr-det reads images, not %s", c.Kind())}
		}
		regions, err := d.detect(ctx, c.Image)
		if err != nil {
			return err
		}
		if err := job.Out.Send(ctx, engine.Chunk{Regions: regions}); err != nil {
			return err
		}
	}
}

// detect finds an image's text regions, in a turn on the CPU.
func (d *Det) detect(ctx context.Context, im *engine.Image) (*engine.Regions, error) {
	turn, err := engine.Turn(ctx)
	if err != nil {
		return nil, err
	}
	defer turn.End()
	img, err := imaging.Decode(im.Bytes, d.lim)
	if err != nil {
		return nil, err
	}
	in, err := d.det.Input(img)
	if err != nil {
		return nil, err
	}
	prob, out, err := runModel(ctx, d.model, in.Tensor, []int64{1, 3, int64(in.Height), int64(in.Width)})
	if err != nil {
		return nil, err
	}
	defer onnx.Recycle([]engine.Tensor{out})
	boxes, err := d.db.Detect(prob, in.Width, in.Height, img.Width, img.Height)
	if err != nil {
		return nil, err
	}
	regions, err := ppocr.Regions(img, boxes)
	if err != nil {
		return nil, err
	}
	return &regions, nil
}

// Close implements engine.Engine.
func (d *Det) Close() error {
	if d.model == nil {
		return nil
	}
	return d.model.Close()
}
