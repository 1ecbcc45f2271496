package onnxstage

// The stage's deploy options, and how its mapping of tensor names meets
// the model's inputs and outputs.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx"
)

// Options are a stage's deploy options: the model, how the chunks' tensor
// names map to its inputs and outputs, and the session's settings
// (library, intra_op_threads, inter_op_threads, graph_optimization,
// spin_wait: see onnx.Options).
type Options struct {
	// Model is the .onnx file.
	Model string `json:"model"`
	// Inputs maps a model input's name to the name of the chunk tensor
	// that feeds it; an input not listed is fed by the tensor of its own
	// name.
	Inputs map[string]string `json:"inputs"`
	// Outputs maps a model output's name to the name it has in the output
	// chunk. Given, only the listed outputs are sent; omitted, every
	// output is, under its own name.
	Outputs map[string]string `json:"outputs"`
	onnx.Options
}

// decodeOptions decodes and checks spec's kinds and options, loading
// nothing.
func decodeOptions(spec engine.Spec) (*Options, error) {
	var errs []error
	if spec.Input != engine.KindTensor || spec.Output != engine.KindTensor {
		errs = append(errs, fmt.Errorf("the stage takes and gives tensor chunks (input: tensor, output: tensor); it declares input: %s, output: %s", spec.Input, spec.Output))
	}
	var o Options
	if err := spec.Options.Decode(&o); err != nil {
		return nil, fmt.Errorf("%s: options: %w", Name, err)
	}
	if o.Model == "" {
		errs = append(errs, errors.New("options.model is missing: give the path of the .onnx file"))
	}
	if err := o.Options.Check(); err != nil {
		errs = append(errs, fmt.Errorf("options: %w", err))
	}
	errs = append(errs, checkNames("inputs", o.Inputs)...)
	errs = append(errs, checkNames("outputs", o.Outputs)...)
	if o.Outputs != nil && len(o.Outputs) == 0 {
		errs = append(errs, errors.New("options.outputs is empty: list the outputs to send, or leave it out to send them all"))
	}
	if len(o.Outputs) > engine.MaxTensors {
		errs = append(errs, fmt.Errorf("options.outputs lists %d outputs; a chunk carries at most %d tensors", len(o.Outputs), engine.MaxTensors))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &o, nil
}

// checkNames reports the empty names in a mapping (options.which), and
// two model tensors mapped to one chunk tensor.
func checkNames(which string, m map[string]string) []error {
	var errs []error
	by := make(map[string]string, len(m))
	for _, model := range slices.Sorted(maps.Keys(m)) {
		chunk := m[model]
		switch {
		case model == "":
			errs = append(errs, fmt.Errorf("options.%s: an empty model tensor name", which))
		case chunk == "":
			errs = append(errs, fmt.Errorf("options.%s.%s: an empty tensor name", which, model))
		case by[chunk] != "":
			errs = append(errs, fmt.Errorf("options.%s: %q and %q both map to tensor %q", which, by[chunk], model, chunk))
		default:
			by[chunk] = model
		}
	}
	return errs
}

// port is one model input or output with the name its chunk tensor has.
type port struct {
	onnx.Spec
	Chunk string
	index int // in the model's inputs or outputs
}

// resolve returns the ports of the model whose inputs and outputs are
// ins and outs under o's mapping, or every error of the mapping against
// them, each naming the model's tensors.
func (o *Options) resolve(ins, outs []onnx.Spec) (inputs, outputs []port, err error) {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(o.Inputs)) {
		if !slices.ContainsFunc(ins, func(s onnx.Spec) bool { return s.Name == name }) {
			errs = append(errs, fmt.Errorf("options.inputs names %q, which the model does not take; its inputs are %s", name, specList(ins)))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Outputs)) {
		if !slices.ContainsFunc(outs, func(s onnx.Spec) bool { return s.Name == name }) {
			errs = append(errs, fmt.Errorf("options.outputs names %q, which the model does not give; its outputs are %s", name, specList(outs)))
		}
	}
	fed := make(map[string]string, len(ins))
	for i, s := range ins {
		chunk := s.Name
		if c, ok := o.Inputs[s.Name]; ok {
			chunk = c
		}
		if other, dup := fed[chunk]; dup {
			errs = append(errs, fmt.Errorf("options.inputs: the model's inputs %q and %q would both be fed by tensor %q", other, s.Name, chunk))
		}
		fed[chunk] = s.Name
		inputs = append(inputs, port{Spec: s, Chunk: chunk, index: i})
	}
	for i, s := range outs {
		chunk, ok := o.Outputs[s.Name]
		if o.Outputs == nil {
			chunk, ok = s.Name, true
		}
		if ok {
			outputs = append(outputs, port{Spec: s, Chunk: chunk, index: i})
		}
	}
	if len(inputs) > engine.MaxTensors {
		errs = append(errs, fmt.Errorf("the model takes %d inputs; a chunk carries at most %d tensors", len(inputs), engine.MaxTensors))
	}
	if len(outputs) > engine.MaxTensors {
		errs = append(errs, fmt.Errorf("the model gives %d outputs; a chunk carries at most %d tensors: choose some with options.outputs", len(outputs), engine.MaxTensors))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("%s: model %s: %w", Name, o.Model, err)
	}
	return inputs, outputs, nil
}

// specList returns specs for a message: "x float32 [-1 3 48 192], ...".
func specList(specs []onnx.Spec) string {
	s := make([]string, len(specs))
	for i, sp := range specs {
		s[i] = sp.String()
	}
	return strings.Join(s, ", ")
}
