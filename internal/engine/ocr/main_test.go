package ocr_test

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/ocr"
	"github.com/omnistage/omnistage/internal/engine/shipped"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/onnx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/testkit"
	"github.com/omnistage/omnistage/internal/turns"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// installed skips the test when ONNX Runtime's library or the PP-OCRv4
// models are not installed.
func installed(tb testing.TB) {
	tb.Helper()
	dir := modelsDir()
	for _, f := range []string{onnx.LibraryPath(""), filepath.Join(dir, ocr.DetFile), filepath.Join(dir, ocr.ClsFile),
		filepath.Join(dir, ocr.RecFile), filepath.Join(dir, ocr.KeysFile)} {
		if _, err := os.Stat(f); err != nil {
			tb.Skipf("%v (scripts/install-deps.sh installs ONNX Runtime and the PP-OCRv4 models)", err)
		}
	}
}

// modelsDir is where the engines find the models.
func modelsDir() string {
	return cmp.Or(os.Getenv(ocr.ModelsEnv), ocr.DefaultModels)
}

// startOCR starts the built-in pipeline name on the shipped engines as
// omnistage serve does (its units of work taking turns on the CPU), with
// its deploy stages replaced by deploy ("    - {id: 2, ...}" lines) when
// deploy is not empty, and returns it and its metrics.
func startOCR(tb testing.TB, name, deploy string) (*orchestrator.Orchestrator, *prometheus.Registry) {
	tb.Helper()
	installed(tb)
	var cfg *pipeline.Config
	if deploy == "" {
		var err error
		if cfg, err = pipeline.Builtin(name); err != nil {
			tb.Fatal(err)
		}
	} else {
		cfg = testkit.Parse(tb, testkit.BuiltinWith(tb, name, deploy))
	}
	metrics := prometheus.NewRegistry()
	o := orchtest.Start(tb, cfg, orchestrator.Options{Registry: shipped.Registry(), Registerer: metrics, Turns: turns.NewDefault()}, time.Minute)
	return o, metrics
}

// read returns the text o's pipeline reads in the image file img: its
// lines in reading order, joined by newlines.
func read(ctx context.Context, o *orchestrator.Orchestrator, img []byte) (string, error) {
	im, err := imaging.Header(img, imaging.DefaultLimits)
	if err != nil {
		return "", err
	}
	s, err := o.Submit(ctx, orchestrator.Request{Image: &im})
	if err != nil {
		return "", err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return "", err
	}
	var text engine.RegionsText
	for _, c := range outs[0].Chunks {
		if c.Regions != nil {
			text.Add(c.Regions.Regions)
		}
	}
	return strings.TrimSuffix(text.String(), "\n"), nil
}

// stage runs stage id of o's pipeline alone on the chunk in and returns
// its output chunks (as POST /v1/run does).
func stage(ctx context.Context, o *orchestrator.Orchestrator, id int, in engine.Chunk) ([]engine.Chunk, error) {
	s, err := o.SubmitStage(ctx, orchestrator.StageCall{Stage: id, Input: engine.NewSliceSource(in)})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return nil, err
	}
	return outs[0].Chunks, nil
}

// recInputs returns what the recognizer of the ocr pipeline o reads in
// each image of set: the regions det finds and cls turns upright, crops
// included, one chunk an image.
func recInputs(tb testing.TB, o *orchestrator.Orchestrator, set []ocrtest.Sample) []*engine.Regions {
	tb.Helper()
	ctx := context.Background()
	var out []*engine.Regions
	for _, s := range set {
		im, err := imaging.Header(s.PNG, imaging.DefaultLimits)
		if err != nil {
			tb.Fatal(err)
		}
		in := engine.Chunk{Image: &im}
		for id := range 2 {
			chunks, err := stage(ctx, o, id, in)
			if err != nil || len(chunks) != 1 || chunks[0].Regions == nil {
				tb.Fatalf("%s: stage %d: %d chunks, %v", s.Name, id, len(chunks), err)
			}
			in = chunks[0]
		}
		if len(in.Regions.Regions) == 0 {
			tb.Fatalf("%s: no regions", s.Name)
		}
		out = append(out, in.Regions)
	}
	return out
}
