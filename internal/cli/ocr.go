package cli

// The ocr command: read the text of an image with a pipeline built in
// this process, and print it, or its regions as JSON.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

// ocrOutput is what ocr --json prints: the text and its regions.
type ocrOutput struct {
	Text    string           `json:"text"`
	Regions []apijson.Region `json:"regions"`
}

func ocr(ctx context.Context, env Env, args []string) int {
	fs := newFlags(env, "ocr", "ocr [--config F] [--json] IMAGE   (IMAGE '-' reads stdin)")
	config := fs.String("config", "builtin:ocr", "pipeline config file, or builtin:NAME: one whose input is an image (builtin:ocr-fast skips the classifier)")
	asJSON := fs.Bool("json", false, "print the text and each region (box, text, confidence) as JSON")
	verbose := fs.Bool("v", false, "log the pipeline's start-up")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(env.Stderr, "omnistage ocr: %v\n", err)
		return code
	}
	if len(pos) != 1 {
		return fail(ExitUsage, errors.New("name one image file (or '-' to read stdin): omnistage ocr [flags] IMAGE"))
	}
	cfg, err := env.loadConfig(*config)
	if err != nil {
		printConfigError(env.Stderr, err)
		return ExitUsage
	}
	if cfg.Pipeline.Input != engine.KindImage {
		return fail(ExitUsage, fmt.Errorf("pipeline %s reads %s, not images: give --config a pipeline whose input is image", cfg.Pipeline.Name, cfg.Pipeline.Input))
	}
	img, err := readImage(pos[0], env.Stdin)
	if err != nil {
		return fail(ExitUsage, err)
	}
	modalities := []string{string(engine.KindText), string(engine.KindRegions)}
	sel, err := cfg.Route.Select(modalities)
	if err != nil {
		return fail(ExitUsage, err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	o, stop, err := env.startLocal(ctx, "ocr", cfg, payload.NewCodec(nil), level, nil, sel.Stages)
	if err != nil {
		return fail(ExitFailure, err)
	}
	defer stop()
	out, err := readText(ctx, o, img, modalities)
	if err != nil {
		if orchestrator.CodeOf(err) == orchestrator.CodeBadRequest {
			return fail(ExitUsage, err)
		}
		return fail(ExitFailure, err)
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return ExitFailure
		}
		return ExitOK
	}
	if out.Text != "" {
		fmt.Fprintln(env.Stdout, out.Text)
	}
	return ExitOK
}

// readImage reads an image file ("-": stdin) and checks its header.
func readImage(path string, stdin io.Reader) (*engine.Image, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, int64(imaging.DefaultLimits.MaxBytes)+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	img, err := imaging.Header(b, imaging.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &img, nil
}

// readText runs one request for img's text and regions.
func readText(ctx context.Context, o *orchestrator.Orchestrator, img *engine.Image, modalities []string) (ocrOutput, error) {
	s, err := o.Submit(ctx, orchestrator.Request{Image: img, Modalities: modalities})
	if err != nil {
		return ocrOutput{}, err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return ocrOutput{}, err
	}
	res := ocrOutput{Regions: []apijson.Region{}}
	for _, o := range outs {
		r, err := apijson.Render(o.Kind, o.Chunks)
		if err != nil {
			return ocrOutput{}, fmt.Errorf("stage %d: %w", o.Stage, err)
		}
		switch o.Kind {
		case engine.KindText:
			res.Text = r.Text
		case engine.KindRegions:
			res.Regions = r.Regions
		}
	}
	return res, nil
}
