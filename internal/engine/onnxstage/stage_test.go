package onnxstage_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/onnxstage"
	"github.com/omnistage/omnistage/internal/onnx"
	"github.com/omnistage/omnistage/internal/onnx/onnxtest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/testkit"
)

// batched are the deploy keys of a stage that batches in these tests:
// a batch waits long for company, so that concurrent requests meet in a
// batch however loaded the machine.
const batched = "max_batch: 8, max_batch_delay: 200ms"

// result is one request's outcome.
type result struct {
	out []engine.Tensors
	err error
}

// runAll runs a request for each text at once and returns their results
// by text.
func runAll(o *orchestrator.Orchestrator, texts []string) map[string]result {
	var mu sync.Mutex
	results := make(map[string]result, len(texts))
	var wg sync.WaitGroup
	for _, text := range texts {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := run(ctx, o, text)
			mu.Lock()
			results[text] = result{out, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return results
}

// alone returns what the model at path gives for each chunk of f, run
// alone in a session of its own.
func alone(t *testing.T, path string, f feed) map[string][]engine.Tensor {
	t.Helper()
	s, err := onnx.Open(path, onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := make(map[string][]engine.Tensor)
	for text, chunks := range f {
		for _, c := range chunks {
			out, err := s.Run(context.Background(), c.Tensors)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			want[text] = append(want[text], out...)
		}
	}
	return want
}

// checkOutputs reports where a request's output chunks differ from want
// (one tensor each) by more than tol.
func checkOutputs(t *testing.T, text string, got result, want []engine.Tensor, tol float64) {
	t.Helper()
	if got.err != nil {
		t.Errorf("%s: %v", text, got.err)
		return
	}
	if len(got.out) != len(want) {
		t.Errorf("%s: %d chunks, want %d", text, len(got.out), len(want))
		return
	}
	for i, c := range got.out {
		if len(c.Tensors) != 1 {
			t.Errorf("%s: chunk %d has %d tensors, want 1", text, i, len(c.Tensors))
		} else if d := near(c.Tensors[0], want[i], tol); d != "" {
			t.Errorf("%s: chunk %d: %s", text, i, d)
		}
	}
}

// TestOutputsMatchSession runs concurrent requests of classifier crops
// (most 192 wide, some 96) through the stage, unbatched and in batches of
// up to 8: each request's outputs are the model's on its own chunks
// (within 1e-5), one chunk per chunk in order, whether its crops ran
// alone, stacked with other requests' or beside crops of another width.
func TestOutputsMatchSession(t *testing.T) {
	path := model(t, clsFile)
	f := feed{
		"several":  {{Tensors: []engine.Tensor{crops("x", 3, 20)}}, {Tensors: []engine.Tensor{crops("x", 1, 21)}}},
		"narrow":   one(wave("x", []int64{1, 3, 48, 96}, 22)),
		"narrow 2": one(wave("x", []int64{2, 3, 48, 96}, 23)),
	}
	texts := []string{"several", "narrow", "narrow 2"}
	for i := range 12 {
		text := fmt.Sprintf("crop %d", i)
		f[text] = one(crops("x", 1, i))
		texts = append(texts, text)
	}
	want := alone(t, path, f)
	got := make(map[int]map[string]result)
	for _, maxBatch := range []int{1, 8} {
		t.Run(fmt.Sprintf("max_batch %d", maxBatch), func(t *testing.T) {
			o, metrics := start(t, f, fmt.Sprintf("max_batch: %d, max_batch_delay: 200ms", maxBatch), map[string]any{"model": path}, nil)
			got[maxBatch] = runAll(o, texts)
			for _, text := range texts {
				checkOutputs(t, text, got[maxBatch][text], want[text], 1e-5)
			}
			batches, items := testkit.BatchStats(t, metrics)
			switch {
			case maxBatch == 1 && batches != 0:
				t.Errorf("max_batch 1 ran %d batches", batches)
			case maxBatch > 1 && items <= float64(batches):
				t.Errorf("%v items in %d batches: no batch was shared", items, batches)
			}
		})
	}
	for _, text := range texts {
		var unbatched []engine.Tensor
		for _, c := range got[1][text].out {
			unbatched = append(unbatched, c.Tensors...)
		}
		if got[1][text].err == nil {
			checkOutputs(t, text+" (batched against unbatched)", got[8][text], unbatched, 1e-5)
		}
	}
}

// TestBadInputs sends each kind of bad input among concurrent good
// requests, all batched together: each bad request fails alone with its
// bad input (a 400 naming the tensor), and each good one gets its own
// outputs.
func TestBadInputs(t *testing.T) {
	path := model(t, clsFile)
	with := func(i int, v float32) engine.Tensor {
		x := crops("x", 1, 0)
		data := append([]byte(nil), x.Data...)
		x = engine.Tensor{Name: "x", Type: x.Type, Shape: x.Shape, Data: data}
		fs, _ := x.Float32s()
		fs[i] = v
		return x
	}
	bad := []struct {
		name  string
		chunk engine.Tensors
		want  string
	}{
		{"element type", engine.Tensors{Tensors: []engine.Tensor{{Name: "x", Type: engine.Int64, Shape: []int64{1, 3, 48, 192}, Data: make([]byte, 8*3*48*192)}}},
			`tensor "x": element type int64, the model takes float32`},
		{"rank", engine.Tensors{Tensors: []engine.Tensor{wave("x", []int64{3, 48, 192}, 0)}},
			`tensor "x": shape [3 48 192], the model takes [-1 3 -1 -1] (rank 4`},
		{"shape", engine.Tensors{Tensors: []engine.Tensor{wave("x", []int64{1, 4, 48, 192}, 0)}},
			`tensor "x": shape [1 4 48 192], the model takes [-1 3 -1 -1] (dimension 1 must be 3`},
		{"element count", engine.Tensors{Tensors: []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1, 3, 48, 192}, Data: make([]byte, 400)}}},
			`tensor "x": shape [1 3 48 192] of float32 makes 110592 bytes, but its data has 400`},
		{"NaN", engine.Tensors{Tensors: []engine.Tensor{with(7, float32(math.NaN()))}},
			`tensor "x": element 7 is not a finite number`},
		{"infinity", engine.Tensors{Tensors: []engine.Tensor{with(3*48*192-1, float32(math.Inf(-1)))}},
			`tensor "x": element 27647 is not a finite number`},
		{"missing", engine.Tensors{Tensors: []engine.Tensor{wave("y", []int64{1, 3, 48, 192}, 0)}},
			`tensor "y": this stage takes no tensor of that name; it takes x float32 [-1 3 -1 -1]`},
		{"extra", engine.Tensors{Tensors: []engine.Tensor{crops("x", 1, 0), wave("y", []int64{1}, 0)}},
			`tensor "y": this stage takes no tensor of that name`},
		{"no tensors", engine.Tensors{}, `no tensors`},
	}
	f := feed{}
	var texts []string
	for i := range 8 {
		text := fmt.Sprintf("good %d", i)
		f[text] = one(crops("x", 1, i))
		texts = append(texts, text)
	}
	want := alone(t, path, f)
	for _, b := range bad {
		f[b.name] = []engine.Tensors{b.chunk}
		texts = append(texts, b.name)
	}
	o, _ := start(t, f, batched, map[string]any{"model": path}, nil)
	got := runAll(o, texts)
	for _, b := range bad {
		err := got[b.name].err
		var ie *engine.InputError
		if !errors.As(err, &ie) || orchestrator.CodeOf(err) != orchestrator.CodeBadRequest || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v; want a bad request saying %q", b.name, err, b.want)
		}
	}
	for _, text := range texts[:8] {
		checkOutputs(t, text, got[text], want[text], 1e-5)
	}
}

// TestRunFailure gives the detector an image its layers cannot join (not
// a multiple of 32) beside a good one, in one batch: the run fails inside
// ONNX Runtime, and the request fails as the server's fault naming the
// stage and the model, never as bad input; the good request succeeds.
func TestRunFailure(t *testing.T) {
	path := model(t, detFile)
	f := feed{
		"unjoinable": one(wave("x", []int64{1, 3, 32, 48}, 0)),
		"good":       one(wave("x", []int64{1, 3, 32, 32}, 0)),
	}
	o, _ := start(t, f, batched, map[string]any{"model": path}, nil)
	got := runAll(o, []string{"unjoinable", "good"})
	err := got["unjoinable"].err
	var ie *engine.InputError
	var re *onnx.RunError
	if errors.As(err, &ie) || !errors.As(err, &re) || orchestrator.CodeOf(err) != orchestrator.CodeStageFailed {
		t.Errorf("unjoinable: %v (code %s); want the stage's failure", err, orchestrator.CodeOf(err))
	} else if msg := err.Error(); !strings.Contains(msg, "stage 1 (model)") || !strings.Contains(msg, detFile) {
		t.Errorf("unjoinable: %v; want it to name stage 1 (model) and %s", err, detFile)
	}
	if r := got["good"]; r.err != nil || len(r.out) != 1 || fmt.Sprint(r.out[0].Tensors[0].Shape) != "[1 1 32 32]" {
		t.Errorf("good: %v, %v; want one map of 1x1x32x32", r.out, r.err)
	}
}

// sumProd writes a model of two inputs a and b [n,2] giving their sum and
// their product.
func sumProd(t testing.TB) string {
	v := func(name string) onnxtest.Value {
		return onnxtest.Value{Name: name, Elem: onnxtest.Float, Dims: []any{"n", 2}}
	}
	return onnxtest.WriteModel(t, []onnxtest.Node{
		{Op: "Add", In: []string{"a", "b"}, Out: []string{"sum"}},
		{Op: "Mul", In: []string{"a", "b"}, Out: []string{"prod"}},
	}, []onnxtest.Value{v("a"), v("b")}, []onnxtest.Value{v("sum"), v("prod")})
}

// TestMapping serves a model of two inputs with one fed from a tensor of
// another name and one of its two outputs sent, renamed, to requests
// batched together: each gets its own product; a request missing an
// input, or naming it as the model does rather than as the stage does,
// fails alone.
func TestMapping(t *testing.T) {
	model(t, clsFile) // skips without the library
	path := sumProd(t)
	f := feed{
		"rows":      one(engine.Float32Tensor("left", []int64{3, 2}, []float32{1, 2, 3, 4, 5, 6}), engine.Float32Tensor("b", []int64{3, 2}, []float32{2, 2, 2, 2, 2, 2})),
		"missing":   one(engine.Float32Tensor("left", []int64{1, 2}, []float32{1, 2})),
		"unmapped":  one(engine.Float32Tensor("a", []int64{1, 2}, []float32{1, 2}), engine.Float32Tensor("b", []int64{1, 2}, []float32{1, 2})),
		"wide rows": one(engine.Float32Tensor("left", []int64{1, 3}, []float32{1, 2, 3}), engine.Float32Tensor("b", []int64{1, 3}, []float32{1, 2, 3})),
	}
	texts := []string{"rows", "missing", "unmapped", "wide rows"}
	for i := range 6 {
		text := fmt.Sprintf("pair %d", i)
		f[text] = one(engine.Float32Tensor("b", []int64{1, 2}, []float32{2, 3}), engine.Float32Tensor("left", []int64{1, 2}, []float32{float32(i), 1}))
		texts = append(texts, text)
	}
	o, metrics := start(t, f, batched, map[string]any{"model": path, "inputs": map[string]string{"a": "left"}, "outputs": map[string]string{"prod": "product"}}, nil)
	got := runAll(o, texts)
	for i := range 6 {
		text := fmt.Sprintf("pair %d", i)
		checkOutputs(t, text, got[text], []engine.Tensor{engine.Float32Tensor("product", []int64{1, 2}, []float32{2 * float32(i), 3})}, 0)
	}
	checkOutputs(t, "rows", got["rows"], []engine.Tensor{engine.Float32Tensor("product", []int64{3, 2}, []float32{2, 4, 6, 8, 10, 12})}, 0)
	for text, want := range map[string]string{
		"missing":   `no tensor "b"; this stage takes left (the model's a float32 [-1 2]), b float32 [-1 2]`,
		"unmapped":  `tensor "a": this stage takes no tensor of that name; it takes left (the model's a float32 [-1 2])`,
		"wide rows": `tensor "left": shape [1 3], the model takes [-1 2]`,
	} {
		var ie *engine.InputError
		if err := got[text].err; !errors.As(err, &ie) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a bad request saying %q", text, err, want)
		}
	}
	if batches, items := testkit.BatchStats(t, metrics); items <= float64(batches) {
		t.Errorf("%v items in %d batches: no batch was shared", items, batches)
	}
}

// TestUnstacked serves a model whose output's dimension 0 is open but is
// not its batch (a transpose): a shared run's outputs cannot be split
// back, and each request still gets the transpose of its own input.
func TestUnstacked(t *testing.T) {
	model(t, clsFile) // skips without the library
	path := onnxtest.WriteModel(t, []onnxtest.Node{{Op: "Transpose", In: []string{"x"}, Out: []string{"y"}}},
		[]onnxtest.Value{{Name: "x", Elem: onnxtest.Float, Dims: []any{"n", "k"}}},
		[]onnxtest.Value{{Name: "y", Elem: onnxtest.Float, Dims: []any{"k", "n"}}})
	f := feed{}
	var texts []string
	for i := range 6 {
		text := fmt.Sprintf("row %d", i)
		f[text] = one(engine.Float32Tensor("x", []int64{1, 2}, []float32{float32(i), 10}))
		texts = append(texts, text)
	}
	var e *onnxstage.Engine
	o, _ := start(t, f, batched, map[string]any{"model": path}, func(made *onnxstage.Engine) { e = made })
	for round := range 2 { // the second runs each item alone from the start
		got := runAll(o, texts)
		for i, text := range texts {
			checkOutputs(t, fmt.Sprint(text, " round ", round), got[text], []engine.Tensor{engine.Float32Tensor("y", []int64{2, 1}, []float32{float32(i), 10})}, 0)
		}
	}
	if !e.Unstacked() {
		t.Error("the stage still stacks the transpose's items")
	}
}
