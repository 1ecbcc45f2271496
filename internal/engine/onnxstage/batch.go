package onnxstage

// Batches: the units of several requests stacked into shared runs of the
// model, and each run's outputs split back.

import (
	"context"
	"fmt"
	"slices"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/onnx"
)

// RunBatch implements engine.Batcher: the items run in as few runs as
// their shapes allow (see the package doc); an item that fails sets its
// Err, and RunBatch itself never fails.
func (e *Engine) RunBatch(ctx context.Context, items []*engine.BatchItem) error {
	for _, g := range e.groups(items) {
		if len(g) == 1 {
			e.runAlone(ctx, g[0])
			continue
		}
		outs, err := e.runShared(ctx, g)
		if err != nil {
			for _, it := range g {
				e.runAlone(ctx, it)
			}
			continue
		}
		for i, it := range g {
			it.Output = outs[i]
		}
	}
	return nil
}

// group is items that stack into one run, and the elements and bytes of
// each input of that run; a group of an item that runs alone has no key.
type group struct {
	key   string
	items []*engine.BatchItem
	elems []int64
	bytes []int64
}

// groups splits items into the runs they share, in order of their first
// items: items of one shape past dimension 0 together, up to a tensor's
// limits. Each item runs alone when the model does not stack.
func (e *Engine) groups(items []*engine.BatchItem) [][]*engine.BatchItem {
	var gs []*group
	stacks := e.stacks && !e.unstacked.Load()
next:
	for _, it := range items {
		u := it.Input.(*unit)
		if !stacks || u.rows < 0 {
			gs = append(gs, &group{items: []*engine.BatchItem{it}})
			continue
		}
		for _, g := range gs {
			if g.key == u.key && g.add(it, u) {
				continue next
			}
		}
		g := &group{key: u.key, elems: make([]int64, len(u.in)), bytes: make([]int64, len(u.in))}
		g.add(it, u)
		gs = append(gs, g)
	}
	out := make([][]*engine.BatchItem, len(gs))
	for i, g := range gs {
		out[i] = g.items
	}
	return out
}

// add adds it (of unit u) to g and reports true, unless a stacked input
// would then pass a tensor's limits (g holds an item already).
func (g *group) add(it *engine.BatchItem, u *unit) bool {
	for j, t := range u.in {
		n := int64(len(t.Data) / t.Type.Size())
		if len(g.items) > 0 && (g.elems[j]+n > engine.MaxTensorElements || g.bytes[j]+int64(len(t.Data)) > engine.MaxTensorBytes) {
			return false
		}
	}
	for j, t := range u.in {
		g.elems[j] += int64(len(t.Data) / t.Type.Size())
		g.bytes[j] += int64(len(t.Data))
	}
	g.items = append(g.items, it)
	return true
}

// runAlone runs one item in a run of its own.
func (e *Engine) runAlone(ctx context.Context, it *engine.BatchItem) {
	out, err := e.sess.Run(ctx, it.Input.(*unit).in)
	if err != nil {
		it.Err = err
		return
	}
	ts := make([]engine.Tensor, len(e.outputs))
	for k, p := range e.outputs {
		ts[k] = out[p.index]
		ts[k].Name = p.Chunk
	}
	e.recycleUnsent(out)
	it.Output = ts
}

// runShared runs the items of g stacked in one run and returns each
// one's output tensors.
func (e *Engine) runShared(ctx context.Context, g []*engine.BatchItem) ([][]engine.Tensor, error) {
	batch := make([]engine.Tensor, len(e.inputs))
	defer onnx.Recycle(batch)
	parts := make([]engine.Tensor, len(g))
	for j, p := range e.inputs {
		for i, it := range g {
			parts[i] = it.Input.(*unit).in[j]
		}
		var err error
		if batch[j], err = onnx.Stack(p.Name, parts, onnx.Pad{}); err != nil {
			return nil, err
		}
	}
	sizes := onnx.Sizes(parts) // every input of an item has its rows
	out, err := e.sess.Run(ctx, batch)
	if err != nil {
		return nil, err
	}
	outs := make([][]engine.Tensor, len(g))
	for i := range outs {
		outs[i] = make([]engine.Tensor, len(e.outputs))
	}
	for k, p := range e.outputs {
		split, err := onnx.Split(out[p.index], sizes)
		if err != nil {
			e.unstacked.Store(true)
			return nil, fmt.Errorf("%s: model %s: output %q does not follow the batch along dimension 0: %w", Name, e.opts.Model, p.Name, err)
		}
		for i := range outs {
			outs[i][k] = split[i]
			outs[i][k].Name = p.Chunk
		}
	}
	e.recycleUnsent(out)
	return outs, nil
}

// recycleUnsent gives the outputs of a run that the stage does not send
// back to the pool.
func (e *Engine) recycleUnsent(out []engine.Tensor) {
	if len(e.outputs) == len(out) {
		return
	}
	for i := range out {
		if !slices.ContainsFunc(e.outputs, func(p port) bool { return p.index == i }) {
			onnx.Recycle(out[i : i+1])
		}
	}
}
