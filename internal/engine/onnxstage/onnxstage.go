// Package onnxstage is the engine onnx: a stage that runs an ONNX model
// of the user's own on the tensor chunks it gets, through package onnx.
//
// # Options
//
// A stage with engine onnx takes and gives tensor chunks (input: tensor,
// output: tensor) and takes, in its deploy entry's options:
//
//	model: PATH                 the .onnx file (required)
//	inputs: {MODEL_NAME: NAME}  the chunk tensor that feeds a model input
//	                            (an input not listed: the tensor of its own name)
//	outputs: {MODEL_NAME: NAME} the model outputs sent, each under NAME
//	                            (omitted: every output, under its own name)
//	library, intra_op_threads, inter_op_threads, graph_optimization, spin_wait
//	                            the session's settings (onnx.Options)
//
// and the deploy keys max_batch and max_batch_delay. Check validates the
// options without loading ONNX Runtime; Warm opens the model and checks
// the mapping against its inputs and outputs, refusing a name the model
// does not have.
//
// # A request
//
// Each input chunk is one unit of work: its tensors are the model's
// inputs (each checked against the model: a missing, unknown or
// malformed tensor fails the request with an *engine.InputError naming
// it), and one output chunk goes out for it, in order. Units go through
// engine.RunBatched, so the runtime gathers the units of concurrent
// requests into batches (max_batch).
//
// # Batches
//
// The items of a batch share a run when the model's dimension 0 is open
// (any size) in every input and every output sent, taken to be the batch:
// the items are stacked along it and each gets its rows of every output
// back. Items whose other dimensions differ run in separate calls within
// the batch (nothing is padded: the stage knows no value that leaves a
// model's output unchanged). A model whose outputs turn out not to follow
// its dimension 0 runs each item alone from then on. A shared run that
// fails inside ONNX Runtime is run again item by item, so that an item
// the model cannot run fails alone; that failure is the server's (the
// request's 5xx names the stage), never the input's.
package onnxstage

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx"
)

// Name is the engine's name in a pipeline.
const Name = "onnx"

// DeployKeys are the deploy keys the engine takes whatever the stage's
// placement: those of a batching engine.
var DeployKeys = []string{"max_batch", "max_batch_delay"}

// Register adds the engine to r.
func Register(r *engine.Registry) {
	r.Register(Name, engine.Driver{
		Check: func(spec engine.Spec) error {
			_, err := decodeOptions(spec)
			return err
		},
		New:        New,
		DeployKeys: DeployKeys,
	})
}

// Engine is one replica: one session of the model.
type Engine struct {
	opts *Options

	// Set by Warm.
	sess    *onnx.Session
	inputs  []port // the model's inputs, in its order
	outputs []port // the outputs sent, in the model's order
	stacks  bool   // items may share a run (dimension 0 open throughout)
	// unstacked is set once a shared run's outputs did not follow its
	// dimension 0: items run alone from then on.
	unstacked atomic.Bool
}

var (
	_ engine.Engine        = (*Engine)(nil)
	_ engine.Batcher       = (*Engine)(nil)
	_ engine.ParamsChecker = (*Engine)(nil)
)

// New builds a replica of spec's stage; Warm opens its model.
func New(spec engine.Spec) (engine.Engine, error) {
	o, err := decodeOptions(spec)
	if err != nil {
		return nil, err
	}
	return &Engine{opts: o}, nil
}

// Warm implements engine.Engine: it loads ONNX Runtime and the model and
// resolves the stage's mapping against the model's inputs and outputs.
func (e *Engine) Warm(ctx context.Context) error {
	if err := onnx.Load(e.opts.Library); err != nil {
		return err // it names the library and scripts/install-deps.sh
	}
	s, err := onnx.Open(e.opts.Model, e.opts.Options)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (options.model names the .onnx file; scripts/install-deps.sh installs the PP-OCRv4 models under /usr/local/share/omnistage/models)", err)
	}
	if err != nil {
		return err
	}
	ins, outs, err := e.opts.resolve(s.Inputs(), s.Outputs())
	if err != nil {
		s.Close()
		return err
	}
	e.sess, e.inputs, e.outputs = s, ins, outs
	e.stacks = true
	for _, p := range append(ins[:len(ins):len(ins)], outs...) {
		if len(p.Shape) == 0 || p.Shape[0] != onnx.Any {
			e.stacks = false
		}
	}
	return nil
}

// CheckParams implements engine.ParamsChecker: the stage takes no params.
func (e *Engine) CheckParams(params json.RawMessage) error {
	var none struct{}
	return engine.DecodeParams(params, &none)
}

// unit is one input chunk's work: the model's inputs.
type unit struct {
	in   []engine.Tensor // in the model's order, under its names
	rows int64           // dimension 0 of each, or -1 when they differ
	key  string          // their dimensions past 0: units of one key stack
}

// Process implements engine.Engine: one output chunk per input chunk.
func (e *Engine) Process(ctx context.Context, job *engine.Job) error {
	if err := e.CheckParams(job.Params); err != nil {
		return err
	}
	for {
		c, err := job.In.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		u, err := e.unitOf(c)
		if err != nil {
			return err
		}
		item := &engine.BatchItem{Input: u, Size: int(rowElements(u.in))}
		if err := engine.RunBatched(ctx, e, []*engine.BatchItem{item}); err != nil {
			return err
		}
		if item.Err != nil {
			return item.Err
		}
		out := &engine.Tensors{Tensors: item.Output.([]engine.Tensor)}
		if err := job.Out.Send(ctx, engine.Chunk{Tensors: out}); err != nil {
			return err
		}
	}
}

// unitOf maps a chunk's tensors to the model's inputs, checking each
// against the model (as an *engine.InputError naming it).
func (e *Engine) unitOf(c engine.Chunk) (*unit, error) {
	if c.Tensors == nil {
		return nil, &engine.InputError{Reason: fmt.Sprintf("a %s chunk; this stage takes tensor chunks", c.Kind())}
	}
	if err := c.Tensors.Check(); err != nil {
		return nil, err
	}
	u := &unit{in: make([]engine.Tensor, len(e.inputs))}
	for i := range c.Tensors.Tensors {
		t := &c.Tensors.Tensors[i]
		j := e.inputIndex(t.Name)
		if j < 0 {
			return nil, &engine.InputError{Reason: fmt.Sprintf("tensor %.64q: this stage takes no tensor of that name; it takes %s", t.Name, e.takes())}
		}
		if err := e.inputs[j].Check(t); err != nil {
			return nil, err
		}
		u.in[j] = engine.Tensor{Name: e.inputs[j].Name, Type: t.Type, Shape: t.Shape, Data: t.Data}
	}
	var key []byte
	for j, t := range u.in {
		if t.Shape == nil {
			return nil, &engine.InputError{Reason: fmt.Sprintf("no tensor %q; this stage takes %s", e.inputs[j].Chunk, e.takes())}
		}
		switch rows := t.Shape[0]; {
		case j == 0:
			u.rows = rows
		case rows != u.rows:
			u.rows = -1
		}
		key = binary.AppendUvarint(key, uint64(len(t.Shape)))
		for _, d := range t.Shape[1:] {
			key = binary.AppendUvarint(key, uint64(d))
		}
	}
	u.key = string(key)
	return u, nil
}

// inputIndex returns the index of the input fed by the chunk tensor
// named name, or -1.
func (e *Engine) inputIndex(name string) int {
	for j := range e.inputs {
		if e.inputs[j].Chunk == name {
			return j
		}
	}
	return -1
}

// takes lists the tensors the stage takes, for messages: "x float32
// [-1 3 48 192]", or "image (the model's x float32 [...])" when the
// stage renames the input.
func (e *Engine) takes() string {
	s := make([]string, len(e.inputs))
	for i, p := range e.inputs {
		if p.Chunk == p.Name {
			s[i] = p.String()
		} else {
			s[i] = fmt.Sprintf("%s (the model's %s)", p.Chunk, p)
		}
	}
	return strings.Join(s, ", ")
}

// rowElements returns the elements of one row (dimension 0) of each of
// the tensors, together: items of equal row sizes are close in the batch
// queue, where those of equal shapes share a run.
func rowElements(ts []engine.Tensor) int64 {
	var n int64
	for _, t := range ts {
		row := int64(1)
		for _, d := range t.Shape[1:] {
			row *= d
		}
		n += row
	}
	return n
}

// Close implements engine.Engine.
func (e *Engine) Close() error {
	if e.sess == nil {
		return nil
	}
	return e.sess.Close()
}
