package external

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testkit"
)

// gather is a batch runner that holds the items handed to it, from any
// calls, until n have come, then runs them all in one RunBatch: the batch
// the runtime's queue would form, made deterministic.
type gather struct {
	b    engine.Batcher
	n    int
	mu   sync.Mutex
	held []*engine.BatchItem
	done chan struct{}
	err  error
}

func newGather(b engine.Batcher, n int) *gather {
	return &gather{b: b, n: n, done: make(chan struct{})}
}

func (g *gather) Run(ctx context.Context, items []*engine.BatchItem) error {
	g.mu.Lock()
	g.held = append(g.held, items...)
	full := len(g.held) == g.n
	g.mu.Unlock()
	if full {
		g.err = g.b.RunBatch(context.Background(), g.held)
		close(g.done)
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestBatches runs six requests' chunks as one batch of the runtime's at
// a program that takes batches of up to 4: it gets two batch messages,
// and each request its own output or its own error.
func TestBatches(t *testing.T) {
	e, stderr := start(t, "batch")
	g := newGather(e, 6)
	ctx := engine.WithBatches(context.Background(), g)
	type req struct {
		params string
		in     engine.Chunk
		want   []engine.Chunk
		err    string
	}
	reqs := []req{
		{`{"gain": 2}`, audio(16000, 1, 2), []engine.Chunk{audio(16000, 2, 4)}, ""},
		{"", audio(16000, 7), []engine.Chunk{audio(16000, 7)}, ""},
		{`{"gain": 9}`, audio(16000, 1), nil, "gain: must be between 0 and 4"},
		{`{"gain": 3}`, audio(16000, -1), []engine.Chunk{audio(16000, -3)}, ""},
		{"", audio(8000, 1), nil, "want 16000 Hz, got 8000"},
		{`{"gain": 0}`, audio(16000, 5), []engine.Chunk{audio(16000, 0)}, ""},
	}
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			out, err := run(ctx, e, r.params, r.in)
			switch {
			case r.err == "" && err != nil:
				t.Errorf("request %d: %v", i, err)
			case r.err != "" && (err == nil || !strings.Contains(err.Error(), r.err)):
				t.Errorf("request %d: %v; want %q", i, err, r.err)
			case r.err == "" && !reflect.DeepEqual(out, r.want):
				t.Errorf("request %d: %+v; want %+v", i, out, r.want)
			}
			var ie *engine.InputError
			var pe *engine.ParamError
			if r.err != "" && !errors.As(err, &ie) && !errors.As(err, &pe) {
				t.Errorf("request %d: %T %v; want the request's own 4xx", i, err, err)
			}
		})
	}
	wg.Wait()
	testkit.Eventually(t, "the program's two batches", func() bool {
		s := stderr.String()
		return strings.Contains(s, "batch of 4") && strings.Contains(s, "batch of 2")
	})
	if err := e.Loss.Err(); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	left := len(e.jobs)
	e.mu.Unlock()
	if left != 0 {
		t.Errorf("%d jobs left after the batches", left)
	}
	// Without the runtime's batches (max_batch 1), each chunk is a batch
	// of its own, in order.
	out, err := run(context.Background(), e, `{"gain": 2}`, audio(16000, 1), audio(16000, 2), audio(16000, 3))
	if want := []engine.Chunk{audio(16000, 2), audio(16000, 4), audio(16000, 6)}; err != nil || !reflect.DeepEqual(out, want) {
		t.Errorf("unbatched: %+v, %v; want %+v", out, err, want)
	}
}

// TestBatchTimeout cancels a batch that makes nothing for the stage's
// timeout: its request fails, and the program, which answers the
// cancels, keeps its replica.
func TestBatchTimeout(t *testing.T) {
	e, _ := start(t, "batchstall", func(s *engine.Spec, _ *Config) { s.Timeout = 200 * time.Millisecond })
	_, err := run(context.Background(), e, "", audio(16000, 1))
	if err == nil || !strings.Contains(err.Error(), "a batch made nothing for its timeout, 200ms") {
		t.Fatalf("stalled batch: %v", err)
	}
	if err := e.Loss.Err(); err != nil {
		t.Fatalf("a stalled batch lost the replica: %v", err)
	}
}

// failRunner fails its test when a Process hands it anything.
type failRunner struct{ t *testing.T }

func (f failRunner) Run(context.Context, []*engine.BatchItem) error {
	f.t.Error("a program that does not batch had its chunks batched")
	return errors.New("no batches here")
}

// TestNoBatchesForJobs checks that a program whose hello offers no
// batches runs jobs, whatever the stage's batches.
func TestNoBatchesForJobs(t *testing.T) {
	e, _ := start(t, "echo")
	ctx := engine.WithBatches(context.Background(), failRunner{t})
	if out, err := run(ctx, e, "", audio(16000, 1), audio(16000, 2)); err != nil || len(out) != 2 {
		t.Fatalf("%+v, %v", out, err)
	}
}

// TestVisionKinds sends a chunk of each of the tensor, image and regions
// kinds through an echo stage program and back.
func TestVisionKinds(t *testing.T) {
	box := [4]engine.Point{{X: 1, Y: 2}, {X: 30, Y: 2.5}, {X: 30, Y: 12}, {X: 1, Y: 11.5}}
	for _, c := range []engine.Chunk{
		{Tensors: &engine.Tensors{Tensors: []engine.Tensor{engine.Float32Tensor("x", []int64{1, 2}, []float32{0.5, -1}),
			{Name: "ids", Type: engine.Int64, Shape: []int64{1}, Data: []byte{9, 0, 0, 0, 0, 0, 0, 0}}}}},
		{Image: &engine.Image{Format: "png", Width: 3, Height: 2, Bytes: []byte("\x89PNG...")}},
		{Regions: &engine.Regions{Width: 40, Height: 20, Regions: []engine.Region{
			{Index: 0, Box: box, Score: 0.9, Crop: &engine.Crop{Width: 2, Height: 1, Pixels: []byte{1, 2, 3, 4, 5, 6}}},
			{Index: 1, Box: box, Score: 0.7, Rotated: true, Text: "Hé", Confidence: []float32{0.99, 0.5}}}}},
	} {
		t.Run(string(c.Kind()), func(t *testing.T) {
			e, _ := start(t, "kind:"+string(c.Kind()), func(s *engine.Spec, _ *Config) { s.Input, s.Output = c.Kind(), c.Kind() })
			out, err := run(context.Background(), e, "", c)
			if err != nil || len(out) != 1 || !reflect.DeepEqual(out[0], c) {
				t.Fatalf("%+v, %v; want %+v", out, err, c)
			}
		})
	}
}

// TestRegionsSplit sends a regions chunk too large for one message: the
// program gets it in several, and their output is all of it, in order.
func TestRegionsSplit(t *testing.T) {
	e, stderr := start(t, "kind:regions", func(s *engine.Spec, _ *Config) { s.Input, s.Output = engine.KindRegions, engine.KindRegions })
	rs := &engine.Regions{Width: 1000, Height: 1000}
	for i := range 400 {
		rs.Regions = append(rs.Regions, engine.Region{Index: i, Score: 0.5, Text: fmt.Sprintf("line %d %s", i, strings.Repeat("x", 40)),
			Box: [4]engine.Point{{X: 0, Y: float32(i)}, {X: 10, Y: float32(i)}, {X: 10, Y: float32(i + 1)}, {X: 0, Y: float32(i + 1)}}})
	}
	out, err := run(context.Background(), e, "", engine.Chunk{Regions: rs})
	if err != nil {
		t.Fatal(err)
	}
	var got []engine.Region
	for _, c := range out {
		got = append(got, c.Regions.Regions...)
	}
	if len(out) < 2 || !reflect.DeepEqual(got, rs.Regions) {
		t.Fatalf("%d chunks of %d regions; want the 400 regions, in several chunks", len(out), len(got))
	}
	if n := strings.Count(stderr.String(), "regions chunk of"); n != len(out) {
		t.Errorf("the program got %d chunks; it sent %d", n, len(out))
	}
}

// TestBadTensorLosesTheReplica: a program's tensor output whose data does
// not fit its shape is a malformed message.
func TestBadTensorLosesTheReplica(t *testing.T) {
	e, _ := start(t, "badtensor", func(s *engine.Spec, _ *Config) { s.Input, s.Output = engine.KindTensor, engine.KindTensor })
	in := engine.Chunk{Tensors: &engine.Tensors{Tensors: []engine.Tensor{engine.Float32Tensor("x", []int64{1}, []float32{1})}}}
	_, err := run(context.Background(), e, "", in)
	if !errors.Is(err, engine.ErrReplicaLost) {
		t.Fatalf("%v; want the replica lost", err)
	}
	lostWith(t, e, err, "the program broke the protocol", `job 1: output: invalid input: tensor chunk: tensor "x": shape [2] of float32 makes 8 bytes, but only 4 of the data are left for it`)
}
