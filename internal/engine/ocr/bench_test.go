package ocr_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/ocr"
	"github.com/omnistage/omnistage/internal/engine/ppocr"
	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/onnx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/testkit"
)

// BenchmarkRecBatch measures the built-in ocr pipeline's recognizer
// (ppocr-rec, stage 2) on its own, as POST /v1/run calls it, in process
// with the CPU shared by turns as omnistage serve does, unbatched
// (max_batch 1: a request's crops run in calls of their own, the first
// line alone, then growing groups) against batched (max_batch 8, the
// default: the crops of concurrent requests share batches, without
// waiting), the stage's session on intra_op_threads 1 and 2. A request is
// the regions of one generated page (6 English, 2 Chinese: 1 to 6 lines,
// found and turned upright by the pipeline's det and cls).
//
// The two are compared wave by wave, so that both see the same load of a
// shared machine: each iteration sends a wave of requests (every page
// once, or 2c requests at c = 16), c at a time, through one pipeline
// and then the same wave through the other, which first turning from one
// iteration to the next. It reports each one's throughput (req/s) and
// mean latency at c (latency-ms), its processor time per request (cpu-ms:
// all the process's threads), and the ratios batched/unbatched of the
// throughput (throughput-ratio: the goal is at least 1), of the processor
// time per request (cpu-ratio), and at c = 1 the latency batching adds
// (latency-added-ms: the goal is at most max_batch_delay, 0), with the
// batched stage's mean batch (items/batch):
//
//	go test -run '^$' -bench BenchmarkRecBatch -benchtime 3x -count 6 ./internal/engine/ocr/ | benchstat -
func BenchmarkRecBatch(b *testing.B) {
	if raceEnabled {
		b.Skip("the race detector slows the Go code: the times would mean nothing")
	}
	set, err := ocrtest.Set(ocrtest.SetOptions{Seed: 5, English: 6, Chinese: 2})
	if err != nil {
		b.Skip(err)
	}
	var pages []*engine.Regions
	for _, threads := range []int{1, 2} {
		var pipes [2]recPipe // unbatched, batched
		for i, mb := range []int{1, 8} {
			o, metrics := startOCR(b, "ocr", fmt.Sprintf("    - {id: 0}\n    - {id: 1, options: {windows: 4, page_vote: true}}\n"+
				"    - {id: 2, max_inflight: 64, max_batch: %d, options: {intra_op_threads: %d}}\n", mb, threads))
			if pages == nil {
				pages = recInputs(b, o, set)
			}
			pipes[i] = recPipe{o, metrics}
			pipes[i].wave(b, pages, len(pages), len(pages)) // ONNX Runtime's first runs of an input shape size its outputs
			pipes[i].wave(b, pages, len(pages), 1)
		}
		for _, c := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("threads=%d/c=%d", threads, c), func(b *testing.B) {
				benchRecPaired(b, pipes, pages, c)
			})
		}
	}
}

// benchRecPaired runs b.N waves of requests, c at a time, through each
// of pipes, and reports what BenchmarkRecBatch says.
func benchRecPaired(b *testing.B, pipes [2]recPipe, pages []*engine.Regions, c int) {
	n := max(len(pages), 2*c)
	var wall, cpu, waited [2]time.Duration
	batches0, items0 := testkit.BatchStats(b, pipes[1].metrics)
	b.ReportAllocs()
	turn := 0
	for b.Loop() {
		for k := range pipes {
			i := (turn + k) % len(pipes)
			t0, c0 := time.Now(), ocrtest.ProcessCPU()
			waited[i] += pipes[i].wave(b, pages, n, c)
			wall[i] += time.Since(t0)
			cpu[i] += ocrtest.ProcessCPU() - c0
		}
		turn++
	}
	reqs := float64(b.N * n)
	for i, name := range []string{"unbatched", "batched"} {
		b.ReportMetric(reqs/wall[i].Seconds(), name+"-req/s")
		b.ReportMetric(float64(waited[i])/reqs/1e6, name+"-latency-ms")
		b.ReportMetric(float64(cpu[i])/reqs/1e6, name+"-cpu-ms")
	}
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "throughput-ratio")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio")
	if c == 1 {
		b.ReportMetric(float64(waited[1]-waited[0])/reqs/1e6, "latency-added-ms")
	}
	if batches, items := testkit.BatchStats(b, pipes[1].metrics); batches > batches0 {
		b.ReportMetric((items-items0)/float64(batches-batches0), "items/batch")
	}
}

// recPipe is a started ocr pipeline whose recognizer is read alone.
type recPipe struct {
	o       *orchestrator.Orchestrator
	metrics *prometheus.Registry
}

// wave reads n pages, the ith pages[i%len(pages)], c at a time, and
// returns the sum of their latencies.
func (p recPipe) wave(b *testing.B, pages []*engine.Regions, n, c int) time.Duration {
	ctx := context.Background()
	var next, waited atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if _, err := stage(ctx, p.o, 2, engine.Chunk{Regions: pages[i%int64(len(pages))]}); err != nil {
					b.Error(err)
					return
				}
				waited.Add(int64(time.Since(t0)))
			}
		})
	}
	wg.Wait()
	return time.Duration(waited.Load())
}

// BenchmarkRecRows runs the recognizer's model (one intra-op thread) on
// 8 crops of one input width, in runs of 1, 2, 4 and 8 crops, alternated
// within each iteration, and reports the processor time per crop of the
// calling thread (ONNX Runtime computes on it: the time holds when other
// processes take the cores) for each run size (rows=N-cpu-ms) and its
// ratio to runs of one crop (rows=N/1): what bounds the runs of
// ppocr-rec's batches (recRunRows in rec.go).
//
//	go test -run '^$' -bench BenchmarkRecRows -count 6 ./internal/engine/ocr/ | benchstat -
func BenchmarkRecRows(b *testing.B) {
	installed(b)
	path := filepath.Join(modelsDir(), ocr.RecFile)
	s, err := onnx.Open(path, onnx.Options{IntraOpThreads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sizes := []int{1, 2, 4, 8}
	for _, w := range []int{320, 448, 640, 1024} {
		b.Run(fmt.Sprintf("width=%d", w), func(b *testing.B) {
			runs := make([]engine.Tensor, len(sizes))
			for i, n := range sizes {
				runs[i] = ramp(s.Inputs()[0].Name, []int64{int64(n), 3, ppocr.RecHeight, int64(w)})
				runRows(b, s, runs[i]) // sizes the outputs of the shape
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := make([]time.Duration, len(sizes))
			turn := 0
			for b.Loop() {
				for k := range sizes {
					i := (turn + k) % len(sizes)
					c0 := threadCPU(b)
					for range 8 / sizes[i] {
						runRows(b, s, runs[i])
					}
					cpu[i] += threadCPU(b) - c0
				}
				turn++
			}
			for i, n := range sizes {
				b.ReportMetric(float64(cpu[i])/float64(8*b.N)/1e6, fmt.Sprintf("rows=%d-cpu-ms", n))
				if n > 1 {
					b.ReportMetric(float64(cpu[i])/float64(cpu[0]), fmt.Sprintf("rows=%d/1", n))
				}
			}
		})
	}
}

func runRows(b *testing.B, s *onnx.Session, in engine.Tensor) {
	out, err := s.Run(context.Background(), []engine.Tensor{in})
	if err != nil {
		b.Fatal(err)
	}
	onnx.Recycle(out)
}

// ramp returns a float32 tensor of shape whose elements vary in [-1, 1]
// with their place, as a normalized crop's do.
func ramp(name string, shape []int64) engine.Tensor {
	n, err := engine.Elements(shape)
	if err != nil {
		panic(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(float64(i) * 0.013))
	}
	return engine.Float32Tensor(name, shape, v)
}

// threadCPU returns the processor time the calling thread has used.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
