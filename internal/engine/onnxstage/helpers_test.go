package onnxstage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/onnxstage"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/onnx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/testdeps"
	"github.com/omnistage/omnistage/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The PP-OCRv4 models scripts/install-deps.sh installs; the classifier
// takes x float32 [-1 3 -1 -1] (PaddleOCR feeds it 48x192 crops) and
// gives softmax_0.tmp_0 float32 [-1 2].
const (
	modelDir = "/usr/local/share/omnistage/models/ppocr-v4"
	clsFile  = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
	detFile  = "ch_PP-OCRv4_det_infer.onnx"
	clsOut   = "softmax_0.tmp_0"
)

// model returns the path of an installed model, skipping the test when
// it or ONNX Runtime's library is missing.
func model(t testing.TB, file string) string {
	t.Helper()
	if _, err := os.Stat(onnx.LibraryPath("")); err != nil {
		testdeps.Missing(t, "ONNX Runtime's library is not installed (%v): scripts/install-deps.sh installs it", err)
	}
	path := filepath.Join(modelDir, file)
	if _, err := os.Stat(path); err != nil {
		testdeps.Missing(t, "the PP-OCRv4 models are not installed (%v): scripts/install-deps.sh installs them", err)
	}
	return path
}

// crops returns a float32 tensor named name of n classifier crops whose
// elements vary in [-1, 1] with their place and seed, as a normalized
// image's do.
func crops(name string, n, seed int) engine.Tensor {
	return wave(name, []int64{int64(n), 3, 48, 192}, seed)
}

// wave returns a float32 tensor of shape whose elements vary in [-1, 1]
// with their place and seed.
func wave(name string, shape []int64, seed int) engine.Tensor {
	count, err := engine.Elements(shape)
	if err != nil {
		panic(err)
	}
	v := make([]float32, count)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)*0.013 + float64(seed)*0.7))
	}
	return engine.Float32Tensor(name, shape, v)
}

// feed maps a request's text to the tensor chunks the pipeline's stage 0
// (test-tensors) makes of it; it is read-only once the pipeline starts.
type feed map[string][]engine.Tensors

func (f feed) make(text string) ([]engine.Tensors, error) {
	chunks, ok := f[text]
	if !ok {
		return nil, fmt.Errorf("the test has no chunks for %q", text)
	}
	return chunks, nil
}

// one returns a feed entry of one chunk of the tensors.
func one(ts ...engine.Tensor) []engine.Tensors {
	return []engine.Tensors{{Tensors: ts}}
}

// pipelineYAML feeds the tensors of test-tensors to an onnx stage.
const pipelineYAML = `
pipeline:
  name: onnx
  input: text
  stages:
    - {id: 0, name: feed, engine: test-tensors, input: text, output: tensor}
    - {id: 1, name: model, engine: onnx, input: tensor, output: tensor, final_output: true}
deploy:
  abort_timeout: 5s
  stages:
    - {id: 0, max_inflight: 32}
    - {id: 1, max_inflight: 32, %s, options: %s}
`

// config returns the pipeline's configuration with the onnx stage's
// deploy keys (YAML: "max_batch: 8, replicas: 2") and options.
func config(t testing.TB, keys string, opts map[string]any) string {
	t.Helper()
	js, err := json.Marshal(opts) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(pipelineYAML, keys, js)
}

// registry holds the onnx engine and test-tensors making f's chunks;
// made, when not nil, is called with each onnx replica built.
func registry(f feed, made func(*onnxstage.Engine)) *engine.Registry {
	reg := &engine.Registry{}
	onnxstage.Register(reg)
	if made != nil {
		drv, _ := reg.Lookup(onnxstage.Name)
		reg = &engine.Registry{}
		reg.Register(onnxstage.Name, engine.Driver{Check: drv.Check, DeployKeys: drv.DeployKeys, New: func(spec engine.Spec) (engine.Engine, error) {
			e, err := drv.New(spec)
			if err == nil {
				made(e.(*onnxstage.Engine))
			}
			return e, err
		}})
	}
	testengine.RegisterTensors(reg, f.make, "test-tensors")
	return reg
}

// start starts the pipeline for the test, the onnx stage with the deploy
// keys and options, its metrics in the registry returned; made is
// registry's.
func start(t testing.TB, f feed, keys string, opts map[string]any, made func(*onnxstage.Engine)) (*orchestrator.Orchestrator, *prometheus.Registry) {
	t.Helper()
	metrics := prometheus.NewRegistry()
	cfg := testkit.Parse(t, config(t, keys, opts))
	o := orchtest.Start(t, cfg, orchestrator.Options{Registry: registry(f, made), Registerer: metrics}, 30*time.Second)
	return o, metrics
}

// startErr builds and starts the pipeline and returns why it cannot.
func startErr(t *testing.T, f feed, opts map[string]any) error {
	t.Helper()
	cfg := testkit.Parse(t, config(t, "max_batch: 1", opts))
	o, err := orchestrator.New(cfg, orchestrator.Options{Registry: registry(f, nil)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = o.Start(ctx)
	if serr := o.Shutdown(ctx); serr != nil {
		t.Errorf("shutdown: %v", serr)
	}
	return err
}

// run runs a request for text and returns its output chunks' tensors.
func run(ctx context.Context, o *orchestrator.Orchestrator, text string) ([]engine.Tensors, error) {
	s, err := o.Submit(ctx, orchestrator.Request{Prompt: engine.Prompt{Text: text}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return nil, err
	}
	var got []engine.Tensors
	for _, c := range outs[0].Chunks {
		if c.Tensors == nil {
			return nil, fmt.Errorf("a %s chunk", c.Kind())
		}
		got = append(got, *c.Tensors)
	}
	return got, nil
}

// near reports where two tensors differ by more than tol, or "".
func near(got, want engine.Tensor, tol float64) string {
	if got.Name != want.Name || got.Type != want.Type || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Sprintf("%s %s %v, want %s %s %v", got.Name, got.Type, got.Shape, want.Name, want.Type, want.Shape)
	}
	g, err := got.Float32s()
	if err != nil {
		return err.Error()
	}
	w, _ := want.Float32s()
	for i := range g {
		if math.Abs(float64(g[i])-float64(w[i])) > tol {
			return fmt.Sprintf("element %d is %v, want %v", i, g[i], w[i])
		}
	}
	return ""
}
