package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/coordinator"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/testkit"
)

// BenchmarkChainFirstOutput measures a Chain's request through three
// stage servers of test engines on loopback: its whole time (ns/op) and
// the time to its first output (first-ns/op), which is what opening each
// next call costs a request before any audio, since the test engines take
// no time over a chunk.
func BenchmarkChainFirstOutput(b *testing.B) {
	cfg := testkit.Parse(b, hoptest.TextPipeline)
	chain := &coordinator.Chain{Stages: hoptest.StartStages(b, cfg, "", nil)}
	var first time.Duration
	for b.Loop() {
		start := time.Now()
		seen := false
		_, err := chain.Run(context.Background(), hoptest.Prompt("first output"), func(engine.Kind, engine.Chunk) error {
			if !seen {
				first += time.Since(start)
				seen = true
			}
			return nil
		})
		if err != nil || !seen {
			b.Fatalf("%v, output %v", err, seen)
		}
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-ns/op")
}
