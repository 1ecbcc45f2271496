package onnx

// What a model takes and gives: its tensors' names, element types and
// shapes, and how they compare with a stage's declaration.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
	ort "github.com/yalue/onnxruntime_go"
)

// Any is a dimension of any size, in a Spec's shape.
const Any = -1

// Spec is one tensor a model takes or gives: its name, element type and
// shape, Any for a dimension the model leaves open (ONNX's symbolic and
// unknown dimensions).
type Spec struct {
	Name  string
	Type  engine.DType
	Shape []int64
}

// String returns the spec as "x float32 [-1 3 48 -1]".
func (s Spec) String() string {
	return fmt.Sprintf("%s %s %s", s.Name, s.Type, FormatShape(s.Shape))
}

// FormatShape returns shape as "[-1 3 48 -1]".
func FormatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// ortTypes maps the element types a tensor chunk carries to ONNX's.
var ortTypes = map[engine.DType]ort.TensorElementDataType{
	engine.Float32: ort.TensorElementDataTypeFloat,
	engine.Float64: ort.TensorElementDataTypeDouble,
	engine.Float16: ort.TensorElementDataTypeFloat16,
	engine.Int8:    ort.TensorElementDataTypeInt8,
	engine.Uint8:   ort.TensorElementDataTypeUint8,
	engine.Int16:   ort.TensorElementDataTypeInt16,
	engine.Int32:   ort.TensorElementDataTypeInt32,
	engine.Int64:   ort.TensorElementDataTypeInt64,
	engine.Bool:    ort.TensorElementDataTypeBool,
}

// dtypeOf returns the chunk element type of an ONNX one, or "" for a type
// a tensor chunk cannot carry.
func dtypeOf(t ort.TensorElementDataType) engine.DType {
	for d, o := range ortTypes {
		if o == t {
			return d
		}
	}
	return ""
}

// specs turns ONNX Runtime's description of a model's inputs or outputs
// (which "input" or "output") into Specs, refusing what a tensor chunk
// cannot carry; outputs also refuse float16, which the binding reads back
// short.
func specs(which string, infos []ort.InputOutputInfo) ([]Spec, error) {
	out := make([]Spec, len(infos))
	for i, info := range infos {
		if info.OrtValueType != ort.ONNXTypeTensor {
			return nil, fmt.Errorf("%s %q is a %s, not a tensor", which, info.Name, info.OrtValueType)
		}
		d := dtypeOf(info.DataType)
		if d == "" || (which == "output" && d == engine.Float16) {
			return nil, fmt.Errorf("%s %q has elements of type %s, which this backend does not carry", which, info.Name, info.DataType)
		}
		shape := make([]int64, len(info.Dimensions))
		for j, dim := range info.Dimensions {
			shape[j] = max(dim, Any)
		}
		out[i] = Spec{Name: info.Name, Type: d, Shape: shape}
	}
	return out, nil
}

// find returns the spec named name, or nil.
func find(specs []Spec, name string) *Spec {
	for i := range specs {
		if specs[i].Name == name {
			return &specs[i]
		}
	}
	return nil
}

// specNames returns the specs' names, in order.
func specNames(specs []Spec) []string {
	n := make([]string, len(specs))
	for i, s := range specs {
		n[i] = s.Name
	}
	return n
}

// names returns the specs' names, for messages.
func names(specs []Spec) string {
	return strings.Join(specNames(specs), ", ")
}

// Declare checks a stage's declaration of the model's tensors against the
// model: every declared input and output is the model's, of its element
// type and rank, and where both fix a dimension they fix it alike (Any on
// either side agrees with any size); every input the model takes is
// declared. It returns every mismatch, each naming the tensor and showing
// both sides.
func (s *Session) Declare(inputs, outputs []Spec) error {
	var errs []error
	errs = compare(errs, "input", inputs, s.inputs)
	for _, m := range s.inputs {
		if find(inputs, m.Name) == nil {
			errs = append(errs, fmt.Errorf("input %q (%s) is not declared; the model takes %s", m.Name, m, names(s.inputs)))
		}
	}
	errs = compare(errs, "output", outputs, s.outputs)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("onnx: model %s: %w", s.path, err)
	}
	return nil
}

// compare appends to errs what is wrong with each declared spec against
// the model's.
func compare(errs []error, which string, declared, model []Spec) []error {
	for _, d := range declared {
		m := find(model, d.Name)
		if m == nil {
			errs = append(errs, fmt.Errorf("%s %q is declared, but the model's %ss are %s", which, d.Name, which, names(model)))
			continue
		}
		if i := slices.IndexFunc(d.Shape, func(n int64) bool { return n < Any }); i >= 0 {
			errs = append(errs, fmt.Errorf("%s %q: declared dimension %d is %d; a dimension is -1 (any size) or more", which, d.Name, i, d.Shape[i]))
			continue
		}
		if d.Type != m.Type || !agree(d.Shape, m.Shape) {
			errs = append(errs, fmt.Errorf("%s %q: declared %s %s, the model's is %s %s", which, d.Name, d.Type, FormatShape(d.Shape), m.Type, FormatShape(m.Shape)))
		}
	}
	return errs
}

// agree reports whether two shapes have one rank and no dimension both fix
// differently.
func agree(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != Any && b[i] != Any && a[i] != b[i] {
			return false
		}
	}
	return true
}
