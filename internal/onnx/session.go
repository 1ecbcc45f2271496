package onnx

// A session: one model loaded in ONNX Runtime, and its runs.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/omnistage/omnistage/internal/engine"
	ort "github.com/yalue/onnxruntime_go"
)

// Options are a session's settings, named as a stage's deploy options
// name them, so that an engine decodes them into this struct.
type Options struct {
	// Library is ONNX Runtime's library file ("": LibraryPath decides).
	Library string `json:"library"`
	// IntraOpThreads is how many threads one run uses (0: 1, so that
	// replicas, not threads, spread over the cores).
	IntraOpThreads int `json:"intra_op_threads"`
	// InterOpThreads is how many threads run independent parts of the
	// graph at once (0: 1).
	InterOpThreads int `json:"inter_op_threads"`
	// Optimization is the graph optimization level: "disable", "basic",
	// "extended" or "all" ("": all).
	Optimization string `json:"graph_optimization"`
	// SpinWait keeps a run's threads spinning between its parallel parts
	// instead of sleeping: a little quicker on cores nothing else wants,
	// much slower on shared ones (they spin on cores other replicas need).
	SpinWait bool `json:"spin_wait"`
}

// optimizationLevels maps Options.Optimization to ONNX Runtime's levels.
var optimizationLevels = map[string]ort.GraphOptimizationLevel{
	"disable":  ort.GraphOptimizationLevelDisableAll,
	"basic":    ort.GraphOptimizationLevelEnableBasic,
	"extended": ort.GraphOptimizationLevelEnableExtended,
	"all":      ort.GraphOptimizationLevelEnableAll,
}

// Check reports what is wrong with o (a negative thread count, an
// unknown optimization level) without loading the library, for a stage's
// configuration check.
func (o Options) Check() error {
	if o.IntraOpThreads < 0 || o.InterOpThreads < 0 {
		return fmt.Errorf("intra_op_threads %d, inter_op_threads %d: threads are 1 or more (0: the default, 1)", o.IntraOpThreads, o.InterOpThreads)
	}
	if _, ok := optimizationLevels[o.optimization()]; !ok {
		return fmt.Errorf("graph_optimization %q: want disable, basic, extended or all", o.Optimization)
	}
	return nil
}

// optimization returns the name of the optimization level ("all" unset).
func (o Options) optimization() string {
	if o.Optimization == "" {
		return "all"
	}
	return o.Optimization
}

// sessionOptions checks o and returns ONNX Runtime's options for it; the
// caller destroys them.
func (o Options) sessionOptions() (*ort.SessionOptions, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	level := optimizationLevels[o.optimization()]
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	spin := "0"
	if o.SpinWait {
		spin = "1"
	}
	err = errors.Join(
		so.SetIntraOpNumThreads(max(o.IntraOpThreads, 1)),
		so.SetInterOpNumThreads(max(o.InterOpThreads, 1)),
		so.SetGraphOptimizationLevel(level),
		so.AddSessionConfigEntry("session.intra_op.allow_spinning", spin),
		so.AddSessionConfigEntry("session.inter_op.allow_spinning", spin))
	if err != nil {
		so.Destroy()
		return nil, err
	}
	return so, nil
}

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("onnx: session closed")

// RunError is a failure inside ONNX Runtime while it ran a model on
// inputs this package accepted: the server's failure, never the
// caller's.
type RunError struct {
	Model string // the model file's name
	Err   error  // ONNX Runtime's error
}

func (e *RunError) Error() string { return fmt.Sprintf("onnx: model %s: %v", e.Model, e.Err) }

func (e *RunError) Unwrap() error { return e.Err }

// Session is one model loaded in ONNX Runtime with its own threads: one
// per replica. See the package doc for its contract.
type Session struct {
	path    string // the model file, for messages
	name    string // its base name, for run errors
	inputs  []Spec
	outputs []Spec

	mu     sync.RWMutex // held for reading by runs, for writing by Close
	sess   *ort.DynamicAdvancedSession
	shapes shapeTable
}

// Open loads the ONNX Runtime library (Load(opts.Library)) and the model
// at path with opts, and reads its inputs and outputs. A model file that is
// missing, not ONNX or cut short, or that takes or gives what a tensor
// chunk cannot carry, is an error naming the file.
func Open(path string, opts Options) (*Session, error) {
	if err := Load(opts.Library); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: %w", path, unwrapPath(err))
	} else if st.IsDir() {
		return nil, fmt.Errorf("onnx: model %s is a directory, not an .onnx file", path)
	}
	so, err := opts.sessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: %w", path, err)
	}
	defer so.Destroy()
	ins, outs, err := describe(path)
	if err != nil {
		return nil, err
	}
	s := &Session{path: path, name: filepath.Base(path), inputs: ins, outputs: outs}
	s.sess, err = ort.NewDynamicAdvancedSession(path, specNames(ins), specNames(outs), so)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: %w", path, err)
	}
	return s, nil
}

// describe returns the inputs and outputs of the model at path, read by
// ONNX Runtime from a session of its own with no graph optimization (the
// quickest to load; the graph's inputs and outputs do not change).
func describe(path string) (inputs, outputs []Spec, err error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, fmt.Errorf("onnx: model %s: %w", path, err)
	}
	defer so.Destroy()
	if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, nil, fmt.Errorf("onnx: model %s: %w", path, err)
	}
	in, out, err := ort.GetInputOutputInfoWithOptions(path, so)
	if err != nil {
		return nil, nil, fmt.Errorf("onnx: model %s: ONNX Runtime cannot load it (is it an .onnx file, whole?): %w", path, err)
	}
	if len(in) == 0 || len(out) == 0 {
		return nil, nil, fmt.Errorf("onnx: model %s has %d inputs and %d outputs; a model to run takes and gives at least one", path, len(in), len(out))
	}
	if inputs, err = specs("input", in); err == nil {
		outputs, err = specs("output", out)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("onnx: model %s: %w", path, err)
	}
	return inputs, outputs, nil
}

// Path returns the model file the session was opened from.
func (s *Session) Path() string { return s.path }

// Inputs returns the tensors the model takes, in its order. The caller must
// not modify them.
func (s *Session) Inputs() []Spec { return s.inputs }

// Outputs returns the tensors the model gives, in the order Run returns
// them. The caller must not modify them.
func (s *Session) Outputs() []Spec { return s.outputs }

// Run runs the model on inputs, one tensor for each of the model's inputs
// in any order, and returns its outputs in the order of Outputs. Inputs are
// checked first (CheckInputs): a refusal is an *engine.InputError and ONNX
// Runtime is not called. A failure inside ONNX Runtime is a *RunError. Run
// does not modify the inputs' data and keeps no reference to it once it
// returns. The outputs are memory that the caller owns and nothing else
// references (see the package doc), which it may give back with Recycle.
// When ctx ends, ONNX Runtime stops the run at the end of the graph node it
// is computing, and Run returns an error wrapping ctx's cause.
func (s *Session) Run(ctx context.Context, inputs []engine.Tensor) ([]engine.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ordered, err := s.order(inputs)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.sess == nil {
		return nil, ErrClosed
	}
	var pins runtime.Pinner
	defer pins.Unpin()
	in := make([]ort.Value, len(ordered))
	defer destroy(in)
	for i, t := range ordered {
		data := aligned(t.Data, t.Type.Size())
		// ONNX Runtime keeps the address in its tensor past this call.
		pins.Pin(&data[0])
		if in[i], err = ort.NewCustomDataTensor(ort.Shape(t.Shape), data, ortTypes[t.Type]); err != nil {
			return nil, &RunError{Model: s.name, Err: fmt.Errorf("input %q: %w", t.Name, err)}
		}
	}
	var keyBuf [64]byte
	key := shapeKey(keyBuf[:0], ordered)
	shapes, known := s.shapes.get(key)
	if shapes != nil {
		out, err := s.runInto(ctx, in, shapes, &pins)
		if err == nil || ctx.Err() != nil {
			return out, err
		}
		// The outputs' shapes were not those of the last run with these
		// input shapes (or the run fails either way): run again with
		// outputs that ONNX Runtime sizes, and do so from now on.
		s.shapes.learn(key, nil)
		known = true
	}
	out, err := s.runAlloc(ctx, in)
	if err == nil && !known {
		s.shapes.learn(key, out)
	}
	return out, err
}

// runInto runs the session with outputs of the given shapes in pooled
// buffers, and returns them.
func (s *Session) runInto(ctx context.Context, in []ort.Value, shapes [][]int64, pins *runtime.Pinner) ([]engine.Tensor, error) {
	out := make([]ort.Value, len(shapes))
	defer destroy(out)
	result := make([]engine.Tensor, len(shapes))
	for i, shape := range shapes {
		spec := &s.outputs[i]
		n, _ := engine.Elements(shape)
		data := buffer(int(n) * spec.Type.Size())
		pins.Pin(&data[0])
		result[i] = engine.Tensor{Name: spec.Name, Type: spec.Type, Shape: slices.Clone(shape), Data: data}
		v, err := ort.NewCustomDataTensor(ort.Shape(shape), data, ortTypes[spec.Type])
		if err != nil {
			Recycle(result)
			return nil, &RunError{Model: s.name, Err: fmt.Errorf("output %q: %w", spec.Name, err)}
		}
		out[i] = v
	}
	if err := s.run(ctx, in, out); err != nil {
		Recycle(result)
		return nil, err
	}
	return result, nil
}

// runAlloc runs the session with outputs that ONNX Runtime allocates and
// the binding copies into Go memory, and returns them.
func (s *Session) runAlloc(ctx context.Context, in []ort.Value) ([]engine.Tensor, error) {
	out := make([]ort.Value, len(s.outputs))
	defer destroy(out)
	if err := s.run(ctx, in, out); err != nil {
		return nil, err
	}
	result := make([]engine.Tensor, len(out))
	for i, v := range out {
		var err error
		if result[i], err = tensorOf(s.outputs[i].Name, v); err != nil {
			return nil, &RunError{Model: s.name, Err: err}
		}
	}
	return result, nil
}

// run runs the session, asking ONNX Runtime to stop between two of the
// graph's nodes when ctx ends (a context that cannot end runs without).
func (s *Session) run(ctx context.Context, in, out []ort.Value) error {
	if ctx.Done() == nil {
		if err := s.sess.Run(in, out); err != nil {
			return &RunError{Model: s.name, Err: err}
		}
		return nil
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		return &RunError{Model: s.name, Err: err}
	}
	defer ro.Destroy()
	terminated := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		ro.Terminate()
		close(terminated)
	})
	err = s.sess.RunWithOptions(in, out, ro)
	if !stop() {
		<-terminated // ro is destroyed after Terminate returns
		return fmt.Errorf("onnx: model %s: run stopped: %w", s.name, context.Cause(ctx))
	}
	if err != nil {
		return &RunError{Model: s.name, Err: err}
	}
	return nil
}

// Close releases the session. It waits for runs in progress; later runs
// return ErrClosed. Closing twice is allowed.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		return nil
	}
	err := s.sess.Destroy()
	s.sess = nil
	return err
}

// destroy releases ONNX Runtime's values (nil ones are skipped).
func destroy(vs []ort.Value) {
	for _, v := range vs {
		if v != nil {
			v.Destroy()
		}
	}
}

// aligned returns data, or a copy of it when its address is not a multiple
// of size (the element size), where ONNX Runtime's kernels expect it.
func aligned(data []byte, size int) []byte {
	if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%uintptr(size) == 0 {
		return data
	}
	words := make([]uint64, (len(data)+7)/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(data))
	copy(buf, data)
	return buf
}

// tensorOf returns the output v named name as a tensor over the Go memory
// the binding copied it into (v itself is destroyed by the caller; the
// memory stays).
func tensorOf(name string, v ort.Value) (engine.Tensor, error) {
	switch t := v.(type) {
	case *ort.Tensor[float32]:
		return view(name, engine.Float32, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[float64]:
		return view(name, engine.Float64, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[int8]:
		return view(name, engine.Int8, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[uint8]:
		return view(name, engine.Uint8, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[int16]:
		return view(name, engine.Int16, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[int32]:
		return view(name, engine.Int32, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[int64]:
		return view(name, engine.Int64, t.GetShape(), t.GetData()), nil
	case *ort.Tensor[bool]:
		return view(name, engine.Bool, t.GetShape(), t.GetData()), nil
	}
	return engine.Tensor{}, fmt.Errorf("output %q is a %s of %v, which this backend does not carry", name, v.GetONNXType(), ort.TensorElementDataType(v.DataType()))
}

// view returns a tensor whose data is d's memory.
func view[T any](name string, typ engine.DType, shape ort.Shape, d []T) engine.Tensor {
	var zero T
	data := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*int(unsafe.Sizeof(zero)))
	if data == nil {
		data = []byte{}
	}
	return engine.Tensor{Name: name, Type: typ, Shape: []int64(shape), Data: data}
}
