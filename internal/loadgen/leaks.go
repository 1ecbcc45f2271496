package loadgen

// The leak check: requests in flight and bindings, read from /metrics after
// a run.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The orchestrator's metrics that the leak check reads.
const (
	MetricInflight = "omnistage_requests_inflight"
	MetricBindings = "omnistage_stage_bindings"
)

// Leaks is what the system under load still holds: in the report, what
// it held when the leak check ended.
type Leaks struct {
	// InFlight is the requests admitted and not ended, draining ones
	// included (omnistage_requests_inflight).
	InFlight int `json:"inflight"`
	// Bindings is the replicas bound to a request, summed over stages
	// (omnistage_stage_bindings).
	Bindings int `json:"bindings"`
	// ByStage is Bindings by stage id.
	ByStage map[string]int `json:"bindings_by_stage"`
	// OK is true when both came back to zero within the leak check's wait.
	OK bool `json:"ok"`
	// Error says why they could not be read, when they could not.
	Error string `json:"error,omitempty"`
}

// zero reports whether nothing is held.
func (l Leaks) zero() bool { return l.InFlight == 0 && l.Bindings == 0 }

// String describes l for a person.
func (l Leaks) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests in flight, %d bindings", l.InFlight, l.Bindings)
	if l.Bindings > 0 {
		b.WriteString(" (")
		for i, id := range slices.Sorted(maps.Keys(l.ByStage)) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "stage %s: %d", id, l.ByStage[id])
		}
		b.WriteString(")")
	}
	return b.String()
}

// ParseMetrics reads the requests in flight and each stage's bindings from
// a Prometheus text exposition (GET /metrics). It is an error for either
// metric to be missing.
func ParseMetrics(r io.Reader) (Leaks, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Leaks{}, fmt.Errorf("parse: %w", err)
	}
	l := Leaks{ByStage: map[string]int{}}
	inflight := families[MetricInflight]
	if inflight == nil || len(inflight.GetMetric()) == 0 {
		return Leaks{}, fmt.Errorf("no %s metric: is this an omnistage server with its pipeline?", MetricInflight)
	}
	for _, m := range inflight.GetMetric() {
		l.InFlight += gauge(m)
	}
	bindings := families[MetricBindings]
	if bindings == nil {
		return Leaks{}, fmt.Errorf("no %s metric: is this an omnistage server with its pipeline?", MetricBindings)
	}
	for _, m := range bindings.GetMetric() {
		stage, pipeline := "?", ""
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "stage":
				stage = lp.GetValue()
			case "pipeline":
				pipeline = lp.GetValue()
			}
		}
		if pipeline != "" {
			// A server of several pipelines: a stage is one pipeline's.
			stage = pipeline + "/" + stage
		}
		n := gauge(m)
		l.ByStage[stage] += n
		l.Bindings += n
	}
	return l, nil
}

// gauge returns a gauge's (or untyped metric's) value as a count.
func gauge(m *dto.Metric) int {
	v := m.GetGauge().GetValue()
	if m.GetGauge() == nil {
		v = m.GetUntyped().GetValue()
	}
	return int(v)
}

// leakPoll is how often the leak check reads the system's state.
const leakPoll = 20 * time.Millisecond

// CheckLeaks reads d's state until nothing is held or wait has passed, and
// returns the last state read: OK when nothing was held, else with Error
// saying why not.
func CheckLeaks(ctx context.Context, d Driver, wait time.Duration) Leaks {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(leakPoll)
	defer tick.Stop()
	last := Leaks{ByStage: map[string]int{}}
	var read bool
	var lastErr error
	for {
		l, err := d.Leaks(ctx)
		switch {
		case err == nil:
			last, read, lastErr = l, true, nil
			if l.zero() {
				last.OK = true
				return last
			}
		case ctx.Err() == nil:
			// An error that the wait's own end caused is no news.
			lastErr = err
		}
		select {
		case <-ctx.Done():
			switch {
			case lastErr != nil:
				last.Error = lastErr.Error()
			case !read:
				last.Error = fmt.Sprintf("could not read the state within %s", wait)
			default:
				last.Error = fmt.Sprintf("still held %s after the load", wait)
			}
			return last
		case <-tick.C:
		}
	}
}
