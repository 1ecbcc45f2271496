package ocr_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/orchestrator"
)

// BenchmarkRecBatch measures the built-in ocr pipeline's recognizer
// (ppocr-rec, stage 2) on its own, as POST /v1/run calls it, in process
// with the CPU shared by turns as omnistage serve does: each request is
// the regions of one generated page (6 English, 2 Chinese; 1 to 6 lines,
// cut out and turned upright by the pipeline's det and cls), c requests
// at a time, with max_batch 1 (a request's crops run in calls of their
// own: the first line alone, then growing groups, crops of one input
// width together) and max_batch 8 (the default: the crops of concurrent
// requests share batches, up to 8, without waiting), the stage's session
// on intra_op_threads 1 and 2. An op is one request, so sec/op is the
// inverse of the throughput (also reported as req/s and crops/s);
// latency-ms is a request's mean time, cpu-ms the process's processor
// time per request (all threads), items/batch the mean batch.
//
// The two max_batch cases of one c run one after the other, on two
// pipelines started together; interleave whole runs on a shared machine:
//
//	for i in 1 2 3 4 5 6; do go test -run '^$' -bench BenchmarkRecBatch -benchtime 64x ./internal/engine/ocr/; done > rec.txt
//	benchstat -col /max_batch rec.txt
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
		type pipe struct {
			o       *orchestrator.Orchestrator
			metrics *prometheus.Registry
		}
		pipes := map[int]pipe{}
		for _, mb := range []int{1, 8} {
			o, metrics := startOCR(b, "ocr", fmt.Sprintf("    - {id: 0}\n    - {id: 1, options: {windows: 4, page_vote: true}}\n"+
				"    - {id: 2, max_inflight: 64, max_batch: %d, options: {intra_op_threads: %d}}\n", mb, threads))
			if pages == nil {
				pages = recInputs(b, o, set)
			}
			warmRec(b, o, pages)
			pipes[mb] = pipe{o, metrics}
		}
		for _, c := range []int{1, 4, 16} {
			for _, mb := range []int{1, 8} {
				b.Run(fmt.Sprintf("threads=%d/c=%d/max_batch=%d", threads, c, mb), func(b *testing.B) {
					benchRec(b, pipes[mb].o, pipes[mb].metrics, pages, c)
				})
			}
		}
	}
}

// warmRec reads every page, alone and all at once: ONNX Runtime's first
// run of each input shape sizes its outputs.
func warmRec(b *testing.B, o *orchestrator.Orchestrator, pages []*engine.Regions) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, p := range pages {
		if _, err := stage(ctx, o, 2, engine.Chunk{Regions: p}); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			if _, err := stage(ctx, o, 2, engine.Chunk{Regions: p}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

// benchRec reads b.N pages, c at a time, with o's recognizer.
func benchRec(b *testing.B, o *orchestrator.Orchestrator, metrics *prometheus.Registry, pages []*engine.Regions, c int) {
	ctx := context.Background()
	batches0, items0 := batchStats(b, metrics)
	cpu0 := ocrtest.ProcessCPU()
	var next, waited, crops atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				p := pages[i%int64(len(pages))]
				t0 := time.Now()
				if _, err := stage(ctx, o, 2, engine.Chunk{Regions: p}); err != nil {
					b.Error(err)
					return
				}
				waited.Add(int64(time.Since(t0)))
				crops.Add(int64(len(p.Regions)))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	elapsed := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/elapsed, "req/s")
	b.ReportMetric(float64(crops.Load())/elapsed, "crops/s")
	b.ReportMetric(float64(waited.Load())/float64(b.N)/1e6, "latency-ms")
	b.ReportMetric(float64(ocrtest.ProcessCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms")
	if batches, items := batchStats(b, metrics); batches > batches0 {
		b.ReportMetric((items-items0)/float64(batches-batches0), "items/batch")
	}
}
