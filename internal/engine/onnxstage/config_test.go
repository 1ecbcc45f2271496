package onnxstage_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/onnxstage"
)

// TestCheck checks stage declarations without loading ONNX Runtime: each
// mistake is refused with what to write instead.
func TestCheck(t *testing.T) {
	tensor := engine.KindTensor
	tests := []struct {
		name          string
		input, output engine.Kind
		opts          engine.Options
		want          string // "" for no error
	}{
		{"good", tensor, tensor, engine.Options{"model": "m.onnx", "intra_op_threads": 2, "inputs": map[string]any{"x": "image"}}, ""},
		{"input kind", engine.KindImage, tensor, engine.Options{"model": "m.onnx"},
			"onnx: the stage takes and gives tensor chunks (input: tensor, output: tensor); it declares input: image, output: tensor"},
		{"output kind", tensor, engine.KindText, engine.Options{"model": "m.onnx"}, "it declares input: tensor, output: text"},
		{"no model", tensor, tensor, engine.Options{}, "onnx: options.model is missing: give the path of the .onnx file"},
		{"unknown option", tensor, tensor, engine.Options{"model": "m.onnx", "threads": 2}, `onnx: options: json: unknown field "threads"`},
		{"threads", tensor, tensor, engine.Options{"model": "m.onnx", "intra_op_threads": -1}, "options: intra_op_threads -1, inter_op_threads 0: threads are 1 or more"},
		{"optimization", tensor, tensor, engine.Options{"model": "m.onnx", "graph_optimization": "max"}, `graph_optimization "max": want disable, basic, extended or all`},
		{"empty input name", tensor, tensor, engine.Options{"model": "m.onnx", "inputs": map[string]any{"x": ""}}, "options.inputs.x: an empty tensor name"},
		{"one tensor for two outputs", tensor, tensor, engine.Options{"model": "m.onnx", "outputs": map[string]any{"p": "out", "q": "out"}}, `options.outputs: "p" and "q" both map to tensor "out"`},
		{"no outputs", tensor, tensor, engine.Options{"model": "m.onnx", "outputs": map[string]any{}}, "options.outputs is empty: list the outputs to send, or leave it out to send them all"},
	}
	reg := &engine.Registry{}
	onnxstage.Register(reg)
	drv, _ := reg.Lookup(onnxstage.Name)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := drv.Check(engine.Spec{StageID: 1, Name: "model", Input: tt.input, Output: tt.output, Options: tt.opts})
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check = %v; want %q", err, tt.want)
			}
		})
	}
	if !strings.Contains(strings.Join(drv.DeployKeys, " "), "max_batch max_batch_delay") {
		t.Errorf("DeployKeys = %v; want the batching keys", drv.DeployKeys)
	}
}

// TestParams: the stage takes no sampling params.
func TestParams(t *testing.T) {
	e, err := onnxstage.New(engine.Spec{Input: engine.KindTensor, Output: engine.KindTensor, Options: engine.Options{"model": "m.onnx"}})
	if err != nil {
		t.Fatal(err)
	}
	c := e.(engine.ParamsChecker)
	if err := c.CheckParams(json.RawMessage(`null`)); err != nil {
		t.Errorf("CheckParams(null) = %v", err)
	}
	var pe *engine.ParamError
	if err := c.CheckParams(json.RawMessage(`{"temperature": 1}`)); !errors.As(err, &pe) || !strings.Contains(err.Error(), "this stage takes no sampling params") {
		t.Errorf("CheckParams = %v; want a *engine.ParamError", err)
	}
}

// TestStartupErrors starts pipelines whose onnx stage cannot run: each
// refuses to start, saying why and naming the file or the model's
// tensors.
func TestStartupErrors(t *testing.T) {
	cls := model(t, clsFile)
	notONNX := filepath.Join(t.TempDir(), "notes.onnx")
	if err := os.WriteFile(notONNX, []byte("these are not the weights you are looking for\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts map[string]any
		want []string
	}{
		{"unknown input", map[string]any{"model": cls, "inputs": map[string]string{"image": "x"}},
			[]string{"warm model/0", cls, `options.inputs names "image", which the model does not take; its inputs are x float32 [-1 3 -1 -1]`}},
		{"unknown output", map[string]any{"model": cls, "outputs": map[string]string{"probs": "p"}},
			[]string{`options.outputs names "probs", which the model does not give; its outputs are softmax_0.tmp_0 float32 [-1 2]`}},
		{"not ONNX", map[string]any{"model": notONNX},
			[]string{"warm model/0", notONNX, "ONNX Runtime cannot load it (is it an .onnx file, whole?)"}},
		{"missing model", map[string]any{"model": "/nonexistent/model.onnx"},
			[]string{"/nonexistent/model.onnx: no such file or directory", "scripts/install-deps.sh"}},
		{"missing library", map[string]any{"model": cls, "library": "/nonexistent/libonnxruntime.so.1"},
			[]string{"/nonexistent/libonnxruntime.so.1: no such file or directory", "scripts/install-deps.sh"}},
		{"no model", map[string]any{"inputs": map[string]string{"x": "image"}},
			[]string{"stage 1 (model)", "options.model is missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := startErr(t, feed{}, tt.opts)
			if err == nil {
				t.Fatal("the pipeline started")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("start: %v; want it to say %q", err, w)
				}
			}
		})
	}
}
