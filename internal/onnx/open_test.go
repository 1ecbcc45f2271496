package onnx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestOpenBadModels opens model files that are missing, a directory, not
// ONNX, empty or cut short: each is an error that names the file.
func TestOpenBadModels(t *testing.T) {
	cls := model(t, clsModel)
	whole, err := os.ReadFile(cls)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "missing.onnx"), "no such file or directory"},
		{"directory", dir, "is a directory"},
		{"not ONNX", write("text.onnx", []byte("this is not a model\n")), "ONNX Runtime cannot load it"},
		{"empty", write("empty.onnx", nil), "ONNX Runtime cannot load it"},
		{"truncated", write("truncated.onnx", whole[:len(whole)/2]), "ONNX Runtime cannot load it"},
		{"truncated at its end", write("end.onnx", whole[:len(whole)-100]), "ONNX Runtime cannot load it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.path, Options{})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) succeeded", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v; want it to name %s and say %q", err, tt.path, tt.want)
			}
		})
	}
}

func TestOpenOptions(t *testing.T) {
	cls := model(t, clsModel)
	tests := []struct {
		opts Options
		want string // "" for success
	}{
		{Options{}, ""},
		{Options{IntraOpThreads: 2, InterOpThreads: 1, Optimization: "basic"}, ""},
		{Options{Optimization: "disable"}, ""},
		{Options{IntraOpThreads: 2, SpinWait: true}, ""},
		{Options{Optimization: "extended"}, ""},
		{Options{Optimization: "all"}, ""},
		{Options{Optimization: "max"}, `graph_optimization "max": want disable, basic, extended or all`},
		{Options{IntraOpThreads: -1}, "intra_op_threads -1, inter_op_threads 0: threads are 1 or more"},
		{Options{Library: "/nonexistent/libonnxruntime.so.1"}, "/nonexistent/libonnxruntime.so.1: no such file or directory (scripts/install-deps.sh installs it"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			s, err := Open(cls, tt.opts)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Open(%+v): %v", tt.opts, err)
			case tt.want == "":
				s.Close()
			case err == nil:
				s.Close()
				t.Fatalf("Open(%+v) succeeded; want %q", tt.opts, tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("Open(%+v): %v; want it to say %q", tt.opts, err, tt.want)
			}
		})
	}
}

// TestDeclare checks stage declarations that differ from the recognizer's
// tensors: each mismatch is reported with both sides.
func TestDeclare(t *testing.T) {
	s := open(t, recModel, Options{})
	in := Spec{"x", engine.Float32, []int64{-1, 3, 48, -1}}
	out := Spec{"softmax_11.tmp_0", engine.Float32, []int64{-1, -1, recChars}}
	tests := []struct {
		name    string
		inputs  []Spec
		outputs []Spec
		want    []string // "" for success
	}{
		{"the model's own", []Spec{in}, []Spec{out}, nil},
		{"narrower", []Spec{{"x", engine.Float32, []int64{8, 3, 48, 320}}}, []Spec{{"softmax_11.tmp_0", engine.Float32, []int64{8, 40, recChars}}}, nil},
		{"any for a fixed dimension", []Spec{{"x", engine.Float32, []int64{-1, -1, -1, -1}}}, nil, nil},
		{"no outputs declared", []Spec{in}, nil, nil},
		{"element type", []Spec{{"x", engine.Uint8, in.Shape}}, nil,
			[]string{`input "x": declared uint8 [-1 3 48 -1], the model's is float32 [-1 3 48 -1]`}},
		{"fixed dimension", []Spec{{"x", engine.Float32, []int64{-1, 3, 32, -1}}}, nil,
			[]string{`input "x": declared float32 [-1 3 32 -1], the model's is float32 [-1 3 48 -1]`}},
		{"rank", []Spec{{"x", engine.Float32, []int64{3, 48, -1}}}, nil,
			[]string{`input "x": declared float32 [3 48 -1], the model's is float32 [-1 3 48 -1]`}},
		{"bad dimension", []Spec{{"x", engine.Float32, []int64{-2, 3, 48, -1}}}, nil,
			[]string{`input "x": declared dimension 0 is -2`}},
		{"unknown input, undeclared input", []Spec{{"image", engine.Float32, in.Shape}}, nil,
			[]string{`input "image" is declared, but the model's inputs are x`, `input "x" (x float32 [-1 3 48 -1]) is not declared`}},
		{"output", []Spec{in}, []Spec{{"softmax_11.tmp_0", engine.Float32, []int64{-1, -1, 6623}}, {"logits", engine.Float32, nil}},
			[]string{`output "softmax_11.tmp_0": declared float32 [-1 -1 6623], the model's is float32 [-1 -1 6625]`, `output "logits" is declared, but the model's outputs are softmax_11.tmp_0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Declare(tt.inputs, tt.outputs)
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("Declare: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Declare succeeded; want %q", tt.want)
			}
			if !strings.Contains(err.Error(), s.Path()) {
				t.Errorf("Declare: %v; want it to name the model %s", err, s.Path())
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Declare: %v; want it to say %q", err, w)
				}
			}
		})
	}
}
