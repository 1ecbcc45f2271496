package ppocr

// Running the PP-OCR models with ONNX Runtime for the end-to-end tests:
// github.com/yalue/onnxruntime_go called directly until the repository's
// ONNX backend lands; swap model for it then.

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// The installed models and library (scripts/install-deps.sh).
const (
	modelDir   = "/usr/local/share/omnistage/models/ppocr-v4/"
	ortLibrary = "/usr/local/lib/omnistage/libonnxruntime.so.1"
	detModel   = modelDir + "ch_PP-OCRv4_det_infer.onnx"
	clsModel   = modelDir + "ch_ppocr_mobile_v2.0_cls_infer.onnx"
	recModel   = modelDir + "ch_PP-OCRv4_rec_infer.onnx"
	keysFile   = modelDir + "ppocr_keys_v1.txt"
)

var (
	ortOnce sync.Once
	ortErr  error
)

// model is one ONNX model with one input and one output, run on one
// intra-op thread.
type model struct {
	sess   *ort.DynamicAdvancedSession
	output ort.InputOutputInfo
}

// loadModel loads the model at path, or skips the test when ONNX Runtime
// or the model is not installed.
func loadModel(t testing.TB, path string) *model {
	t.Helper()
	for _, f := range []string{ortLibrary, path} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%v (scripts/install-deps.sh installs ONNX Runtime and the PP-OCR models)", err)
		}
	}
	ortOnce.Do(func() {
		ort.SetSharedLibraryPath(ortLibrary)
		ortErr = ort.InitializeEnvironment(ort.WithLogLevelError())
	})
	if ortErr != nil {
		t.Fatalf("onnxruntime: %v", ortErr)
	}
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 1 || len(outs) != 1 {
		t.Fatalf("%s: %d inputs, %d outputs; want 1 and 1", path, len(ins), len(outs))
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer opts.Destroy()
	if err := opts.SetIntraOpNumThreads(1); err != nil {
		t.Fatal(err)
	}
	if err := opts.SetInterOpNumThreads(1); err != nil {
		t.Fatal(err)
	}
	sess, err := ort.NewDynamicAdvancedSession(path, []string{ins[0].Name}, []string{outs[0].Name}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Destroy() })
	return &model{sess: sess, output: outs[0]}
}

// run runs the model on one float32 tensor and returns its output and
// the output's shape.
func (m *model) run(in []float32, shape ...int64) ([]float32, []int64, error) {
	x, err := ort.NewTensor(ort.NewShape(shape...), in)
	if err != nil {
		return nil, nil, err
	}
	defer x.Destroy()
	outs := []ort.Value{nil}
	if err := m.sess.Run([]ort.Value{x}, outs); err != nil {
		return nil, nil, err
	}
	defer outs[0].Destroy()
	y, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, nil, fmt.Errorf("output %s is %T, not float32", m.output.Name, outs[0])
	}
	return slices.Clone(y.GetData()), slices.Clone(y.GetShape()), nil
}
