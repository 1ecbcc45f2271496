package testkit

// Reading the runtime's metrics in tests.

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BatchStats returns how many batches the stages whose metrics reg holds
// ran (omnistage_batch_size), and how many items they held.
func BatchStats(tb testing.TB, reg *prometheus.Registry) (batches uint64, items float64) {
	tb.Helper()
	families, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "omnistage_batch_size" {
			continue
		}
		for _, m := range f.GetMetric() {
			batches += m.GetHistogram().GetSampleCount()
			items += m.GetHistogram().GetSampleSum()
		}
	}
	return batches, items
}
