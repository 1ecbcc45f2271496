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
	dir := cmp.Or(os.Getenv(ocr.ModelsEnv), ocr.DefaultModels)
	for _, f := range []string{onnx.LibraryPath(""), filepath.Join(dir, ocr.DetFile), filepath.Join(dir, ocr.ClsFile),
		filepath.Join(dir, ocr.RecFile), filepath.Join(dir, ocr.KeysFile)} {
		if _, err := os.Stat(f); err != nil {
			tb.Skipf("%v (scripts/install-deps.sh installs ONNX Runtime and the PP-OCRv4 models)", err)
		}
	}
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
