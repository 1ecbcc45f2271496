package loadgen

// The open-loop pacer: when each request of a constant rate starts.

import (
	"context"
	"math"
	"time"
)

// pacer is the arrival schedule of a run at a fixed rate: arrival i is due
// at start + i/rate, computed from i rather than by adding intervals, so
// that rounding never accumulates. The schedule ends after n arrivals when
// n > 0, else with the last arrival due before start + dur.
type pacer struct {
	start time.Time
	rate  float64 // arrivals per second
	n     int
	dur   time.Duration
}

// at returns when arrival i is due, and false when the schedule has ended
// before it.
func (p pacer) at(i int) (time.Time, bool) {
	if p.n > 0 && i >= p.n {
		return time.Time{}, false
	}
	off := float64(i) / p.rate * float64(time.Second)
	if off >= math.MaxInt64 {
		return time.Time{}, false
	}
	d := time.Duration(math.Round(off))
	if p.n <= 0 && d >= p.dur {
		return time.Time{}, false
	}
	return p.start.Add(d), true
}

// waitUntil waits on timer until t, or until ctx ends (returning its error).
func waitUntil(ctx context.Context, timer *time.Timer, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		timer.Stop()
		return ctx.Err()
	}
}
