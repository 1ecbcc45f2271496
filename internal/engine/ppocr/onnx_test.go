package ppocr

// Running the PP-OCR models for the end-to-end tests, through the
// repository's ONNX Runtime backend (package onnx), one intra-op thread.

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// The installed models and library (scripts/install-deps.sh).
const (
	modelDir = "/usr/local/share/omnistage/models/ppocr-v4/"
	detModel = modelDir + "ch_PP-OCRv4_det_infer.onnx"
	clsModel = modelDir + "ch_ppocr_mobile_v2.0_cls_infer.onnx"
	recModel = modelDir + "ch_PP-OCRv4_rec_infer.onnx"
	keysFile = modelDir + "ppocr_keys_v1.txt"
)

// model is one ONNX model with one input and one output.
type model struct {
	sess *onnx.Session
}

// loadModel loads the model at path, or skips the test when ONNX Runtime
// or the model is not installed.
func loadModel(t testing.TB, path string) *model {
	t.Helper()
	for _, f := range []string{onnx.LibraryPath(""), path} {
		if _, err := os.Stat(f); err != nil {
			testdeps.Missing(t, "%v (scripts/install-deps.sh installs ONNX Runtime and the PP-OCR models)", err)
		}
	}
	sess, err := onnx.Open(path, onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	if len(sess.Inputs()) != 1 || len(sess.Outputs()) != 1 {
		t.Fatalf("%s: %d inputs, %d outputs; want 1 and 1", path, len(sess.Inputs()), len(sess.Outputs()))
	}
	return &model{sess: sess}
}

// run runs the model on one float32 tensor and returns its output and
// the output's shape.
func (m *model) run(in []float32, shape ...int64) ([]float32, []int64, error) {
	out, err := m.sess.Run(context.Background(), []engine.Tensor{engine.Float32Tensor(m.sess.Inputs()[0].Name, shape, in)})
	if err != nil {
		return nil, nil, err
	}
	y, err := out[0].Float32s()
	if err != nil {
		return nil, nil, err
	}
	return y, slices.Clone(out[0].Shape), nil
}
