//go:build unix

package onnxstage_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/testkit"
)

// BenchmarkStage runs requests of one input chunk through the stage in
// process, c at a time, unbatched (max_batch=1: each chunk a run of its
// own, concurrent runs on the cores) and batched (max_batch=8: the chunks
// of concurrent requests stacked into one run, a replica running as many
// at once as there are cores: by default a batch is what queued while
// the runs before it ran, with delay=2ms the first chunk waits up to 2ms
// for company), with one replica and with two (one per core), on two
// models: the PP-OCR classifier on one crop
// (1x3x48x192, compute-bound: about 0.85ms of CPU a crop) and a model of
// one Add and one Mul on two [1,2] tensors, whose run is all call
// overhead. An op is one request; latency-ms is a request's mean time,
// cpu-ms the process's CPU time per request (all threads: it holds when
// other processes take the cores), items/batch the mean batch. The cases
// interleave with -count:
//
//	go test -run '^$' -bench BenchmarkStage -count 6 ./internal/engine/onnxstage | benchstat -col /max_batch -
func BenchmarkStage(b *testing.B) {
	cls := model(b, clsFile)
	tiny := sumProd(b)
	f := feed{
		"crop": one(crops("x", 1, 0)),
		"pair": one(engine.Float32Tensor("a", []int64{1, 2}, []float32{1, 2}), engine.Float32Tensor("b", []int64{1, 2}, []float32{3, 4})),
	}
	for _, m := range []struct{ name, path, text string }{{"cls", cls, "crop"}, {"add", tiny, "pair"}} {
		for _, c := range []int{1, 4, 16} {
			for _, replicas := range []int{1, 2} {
				for _, batch := range []struct{ name, keys string }{
					{"1", "max_batch: 1"},
					{"8", "max_batch: 8"},
					{"8,delay=2ms", "max_batch: 8, max_batch_delay: 2ms"},
				} {
					name := fmt.Sprintf("model=%s/c=%d/replicas=%d/max_batch=%s", m.name, c, replicas, batch.name)
					b.Run(name, func(b *testing.B) {
						keys := fmt.Sprintf("replicas: %d, %s", replicas, batch.keys)
						benchRequests(b, f, m.text, keys, map[string]any{"model": m.path}, c)
					})
				}
			}
		}
	}
}

// benchRequests times b.N requests for text, c at a time, through the
// pipeline whose onnx stage has the deploy keys and options.
func benchRequests(b *testing.B, f feed, text, keys string, opts map[string]any, c int) {
	o, metrics := start(b, f, keys, opts, nil)
	ctx := context.Background()
	for range 4 { // the first runs size the outputs of each replica
		if _, err := run(ctx, o, text); err != nil {
			b.Fatal(err)
		}
	}
	batches0, items0 := testkit.BatchStats(b, metrics)
	cpu0 := cpuTime(b)
	var next, waited atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := run(ctx, o, text); err != nil {
					b.Error(err)
					return
				}
				waited.Add(int64(time.Since(t0)))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(waited.Load())/float64(b.N)/1e6, "latency-ms")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N)/1e6, "cpu-ms")
	if batches, items := testkit.BatchStats(b, metrics); batches > batches0 {
		b.ReportMetric((items-items0)/float64(batches-batches0), "items/batch")
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
