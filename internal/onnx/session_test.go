package onnx

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// The PP-OCRv4 models scripts/install-deps.sh installs, and their tensors.
const (
	modelDir = "/usr/local/share/omnistage/models/ppocr-v4"
	detModel = "ch_PP-OCRv4_det_infer.onnx"
	clsModel = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
	recModel = "ch_PP-OCRv4_rec_infer.onnx"
	recChars = 6625 // ppocr_keys_v1.txt's 6623, the CTC blank and the space
)

// model returns the path of the installed model file, skipping the test
// when it or the library is missing.
func model(t testing.TB, file string) string {
	t.Helper()
	lib := LibraryPath("")
	if _, err := os.Stat(lib); err != nil {
		testdeps.Missing(t, "ONNX Runtime's library is not installed (%v): scripts/install-deps.sh installs it", err)
	}
	path := filepath.Join(modelDir, file)
	if _, err := os.Stat(path); err != nil {
		testdeps.Missing(t, "the PP-OCRv4 models are not installed (%v): scripts/install-deps.sh installs them", err)
	}
	return path
}

// open opens the installed model file with opts, closing it at the end of
// the test.
func open(t testing.TB, file string, opts Options) *Session {
	t.Helper()
	s, err := Open(model(t, file), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// constant returns a float32 tensor x of shape with every element v.
func constant(shape []int64, v float32) engine.Tensor {
	n, err := engine.Elements(shape)
	if err != nil {
		panic(err)
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = v
	}
	return engine.Float32Tensor("x", shape, data)
}

// ramp returns a float32 tensor x of shape whose elements vary in [-1, 1]
// with their position, as a normalized image's do.
func ramp(shape []int64) engine.Tensor {
	n, _ := engine.Elements(shape)
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(math.Sin(float64(i) * 0.01))
	}
	return engine.Float32Tensor("x", shape, data)
}

func floats(t *testing.T, x engine.Tensor) []float32 {
	t.Helper()
	f, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestModels(t *testing.T) {
	tests := []struct {
		file    string
		in      []int64
		inSpec  Spec
		outSpec Spec
		out     []int64
	}{
		{detModel, []int64{1, 3, 64, 96}, Spec{"x", engine.Float32, []int64{-1, 3, -1, -1}}, Spec{"sigmoid_0.tmp_0", engine.Float32, []int64{-1, 1, -1, -1}}, []int64{1, 1, 64, 96}},
		{clsModel, []int64{1, 3, 48, 192}, Spec{"x", engine.Float32, []int64{-1, 3, -1, -1}}, Spec{"softmax_0.tmp_0", engine.Float32, []int64{-1, 2}}, []int64{1, 2}},
		{recModel, []int64{1, 3, 48, 320}, Spec{"x", engine.Float32, []int64{-1, 3, 48, -1}}, Spec{"softmax_11.tmp_0", engine.Float32, []int64{-1, -1, recChars}}, []int64{1, 40, recChars}},
		{recModel, []int64{2, 3, 48, 160}, Spec{"x", engine.Float32, []int64{-1, 3, 48, -1}}, Spec{"softmax_11.tmp_0", engine.Float32, []int64{-1, -1, recChars}}, []int64{2, 20, recChars}},
	}
	for _, tt := range tests {
		t.Run(tt.file+FormatShape(tt.in), func(t *testing.T) {
			s := open(t, tt.file, Options{})
			if got := s.Inputs(); len(got) != 1 || got[0].String() != tt.inSpec.String() {
				t.Errorf("Inputs() = %v; want [%v]", got, tt.inSpec)
			}
			if got := s.Outputs(); len(got) != 1 || got[0].String() != tt.outSpec.String() {
				t.Errorf("Outputs() = %v; want [%v]", got, tt.outSpec)
			}
			if err := s.Declare([]Spec{tt.inSpec}, []Spec{tt.outSpec}); err != nil {
				t.Errorf("Declare(the model's own specs): %v", err)
			}
			out, err := s.Run(context.Background(), []engine.Tensor{ramp(tt.in)})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].Name != tt.outSpec.Name || out[0].Type != engine.Float32 || FormatShape(out[0].Shape) != FormatShape(tt.out) {
				t.Fatalf("Run gave %d tensors, the first %s %s %s; want %s float32 %s", len(out), out[0].Name, out[0].Type, FormatShape(out[0].Shape), tt.outSpec.Name, FormatShape(tt.out))
			}
			if err := out[0].Check(); err != nil {
				t.Error(err)
			}
			for i, v := range floats(t, out[0]) {
				if v < 0 || v > 1 || math.IsNaN(float64(v)) {
					t.Fatalf("output element %d is %v; a sigmoid's or softmax's is in [0, 1]", i, v)
				}
			}
		})
	}
}

// TestClsSumsToOne runs the orientation classifier on a constant crop:
// its two probabilities (0° and 180°) sum to 1.
func TestClsSumsToOne(t *testing.T) {
	s := open(t, clsModel, Options{})
	for _, v := range []float32{-1, 0, 0.5, 1} {
		out, err := s.Run(context.Background(), []engine.Tensor{constant([]int64{1, 3, 48, 192}, v)})
		if err != nil {
			t.Fatal(err)
		}
		p := floats(t, out[0])
		if len(p) != 2 || math.Abs(float64(p[0]+p[1])-1) > 1e-5 {
			t.Errorf("crop of %v: probabilities %v; want two that sum to 1", v, p)
		}
	}
}

// TestBatch runs two text-line crops of different widths as one padded
// batch and checks that the wider one's output, split back, is what it
// gives alone.
func TestBatch(t *testing.T) {
	s := open(t, recModel, Options{})
	wide, narrow := ramp([]int64{1, 3, 48, 320}), ramp([]int64{1, 3, 48, 160})
	items := []engine.Tensor{narrow, wide}
	for _, item := range items {
		if err := s.CheckInputs([]engine.Tensor{item}); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := Stack("x", items, Pad{Dims: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(context.Background(), []engine.Tensor{batch})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := Split(out[0], Sizes(items))
	if err != nil {
		t.Fatal(err)
	}
	alone, err := s.Run(context.Background(), []engine.Tensor{wide})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := FormatShape(parts[1].Shape), FormatShape(alone[0].Shape); got != want {
		t.Fatalf("the wide crop's part of the batch has shape %s; alone, %s", got, want)
	}
	a, b := floats(t, parts[1]), floats(t, alone[0])
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-4 {
			t.Fatalf("element %d: %v in the batch, %v alone", i, a[i], b[i])
		}
	}
}

// TestBadInputs gives the recognizer every kind of bad input: each is an
// *engine.InputError that names the fault, and the session runs good input
// afterwards.
func TestBadInputs(t *testing.T) {
	s := open(t, recModel, Options{})
	good := func() engine.Tensor { return constant([]int64{1, 3, 48, 320}, 0) }
	with := func(i int, v float32) engine.Tensor {
		x := good()
		f, _ := x.Float32s()
		f[i] = v
		return x
	}
	tests := []struct {
		name   string
		inputs []engine.Tensor
		want   string
	}{
		{"no tensors", nil, `no tensor "x"; the model takes x float32 [-1 3 48 -1]`},
		{"unknown name", []engine.Tensor{good(), {Name: "y", Type: engine.Float32, Shape: []int64{1}, Data: make([]byte, 4)}}, `tensor "y": the model takes no tensor of that name; it takes x`},
		{"two of one name", []engine.Tensor{good(), good()}, `two tensors named "x"`},
		{"element type", []engine.Tensor{{Name: "x", Type: engine.Int64, Shape: []int64{1, 3, 48, 320}, Data: make([]byte, 8*3*48*320)}}, `tensor "x": element type int64, the model takes float32`},
		{"unknown element type", []engine.Tensor{{Name: "x", Type: "complex64", Shape: []int64{1}, Data: make([]byte, 8)}}, `unknown element type "complex64"`},
		{"rank", []engine.Tensor{constant([]int64{3, 48, 320}, 0)}, `tensor "x": shape [3 48 320], the model takes [-1 3 48 -1] (rank 4`},
		{"fixed dimension", []engine.Tensor{constant([]int64{1, 3, 32, 320}, 0)}, `tensor "x": shape [1 3 32 320], the model takes [-1 3 48 -1] (dimension 2 must be 48`},
		{"channels", []engine.Tensor{constant([]int64{1, 1, 48, 320}, 0)}, `dimension 1 must be 3`},
		{"data shorter than its shape", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1, 3, 48, 320}, Data: make([]byte, 4*3*48*319)}}, `makes 184320 bytes, but its data has 183744`},
		{"data longer than its shape", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1, 3, 48, 10}, Data: make([]byte, 4*3*48*320)}}, `makes 5760 bytes, but its data has 184320`},
		{"huge shape, little data", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1 << 20, 3, 48, 1 << 20}, Data: make([]byte, 16)}}, `has more than 67108864 elements`},
		{"large shape, little data", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1, 3, 48, 100000}, Data: make([]byte, 16)}}, `makes 57600000 bytes, but its data has 16`},
		{"negative dimension", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1, 3, 48, -320}, Data: nil}}, `dimension 3 is -320`},
		{"empty batch", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{0, 3, 48, 320}, Data: []byte{}}}, `tensor "x": shape [0 3 48 320] has no elements (dimension 0 is 0)`},
		{"empty width", []engine.Tensor{{Name: "x", Type: engine.Float32, Shape: []int64{1, 3, 48, 0}, Data: []byte{}}}, `(dimension 3 is 0)`},
		{"NaN", []engine.Tensor{with(1234, float32(math.NaN()))}, `tensor "x": element 1234 is not a finite number`},
		{"+Inf", []engine.Tensor{with(0, float32(math.Inf(1)))}, `element 0 is not a finite number`},
		{"-Inf last", []engine.Tensor{with(3*48*320-1, float32(math.Inf(-1)))}, `element 46079 is not a finite number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := s.Run(context.Background(), tt.inputs)
			var ie *engine.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("Run = %v, %v; want an *engine.InputError", out, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %v; want it to say %q", err, tt.want)
			}
			if err2 := s.CheckInputs(tt.inputs); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("CheckInputs = %v; Run said %v", err2, err)
			}
		})
	}
	if _, err := s.Run(context.Background(), []engine.Tensor{good()}); err != nil {
		t.Errorf("good input after the bad: %v", err)
	}
}

// TestRunError gives the detector an image whose size its layers cannot
// join (not a multiple of 32): ONNX Runtime fails, and the error is the
// server's, naming the model.
func TestRunError(t *testing.T) {
	s := open(t, detModel, Options{})
	_, err := s.Run(context.Background(), []engine.Tensor{constant([]int64{1, 3, 32, 48}, 0)})
	var re *RunError
	var ie *engine.InputError
	if !errors.As(err, &re) || errors.As(err, &ie) {
		t.Fatalf("Run = %v; want a *RunError and no *engine.InputError", err)
	}
	if re.Model != detModel || !strings.Contains(err.Error(), "onnx: model "+detModel+": ") {
		t.Errorf("Run: %v; want it to name model %s", err, detModel)
	}
}

// TestCancel ends the context of a run of the detector on a large image
// (over a second on one thread): the run stops with the context's error.
func TestCancel(t *testing.T) {
	s := open(t, detModel, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Run(ctx, []engine.Tensor{constant([]int64{1, 3, 32, 32}, 0)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with an ended context = %v; want context.Canceled", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := s.Run(ctx, []engine.Tensor{constant([]int64{1, 3, 960, 960}, 0)})
	t.Logf("the run cancelled after 50 ms returned after %v", time.Since(start))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run cancelled after 50 ms = %v; want context.Canceled", err)
	}
	var re *RunError
	if errors.As(err, &re) {
		t.Errorf("Run cancelled: %v is a *RunError; a cancelled run is not the server's failure", err)
	}
	if _, err := s.Run(context.Background(), []engine.Tensor{constant([]int64{1, 3, 32, 32}, 0)}); err != nil {
		t.Errorf("run after a cancelled one: %v", err)
	}
}

// TestConcurrentRuns runs one session from several goroutines while it is
// closed: every run gives the same answer or ErrClosed.
func TestConcurrentRuns(t *testing.T) {
	s := open(t, clsModel, Options{})
	in := []engine.Tensor{ramp([]int64{1, 3, 48, 192})}
	first, err := s.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := floats(t, first[0])
	ran := make(chan struct{}) // closed after the first concurrent run
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				out, err := s.Run(context.Background(), in)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				once.Do(func() { close(ran) })
				if got := floats(t, out[0]); got[0] != want[0] || got[1] != want[1] {
					t.Errorf("concurrent run gave %v; alone, %v", got, want)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-ran:
	case <-done: // every run failed: reported above
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	<-done
	if _, err := s.Run(context.Background(), in); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v; want ErrClosed", err)
	}
}

// TestUnalignedInput runs the classifier on a crop whose data does not
// start at a multiple of 4 bytes: the answer is the aligned crop's.
func TestUnalignedInput(t *testing.T) {
	s := open(t, clsModel, Options{})
	x := ramp([]int64{1, 3, 48, 192})
	want, err := s.Run(context.Background(), []engine.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(x.Data)+1)
	copy(buf[1:], x.Data)
	odd := x
	odd.Data = buf[1:]
	got, err := s.Run(context.Background(), []engine.Tensor{odd})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := floats(t, got[0]), floats(t, want[0]); !slices.Equal(g, w) {
		t.Errorf("unaligned crop: %v; aligned: %v", g, w)
	}
}
