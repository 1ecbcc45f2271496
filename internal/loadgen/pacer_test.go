package loadgen

import (
	"testing"
	"time"
)

func TestPacerSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name string
		p    pacer
		want []time.Duration // the offsets of every arrival, then the schedule ends
	}{
		{"count", pacer{start: t0, rate: 4, n: 5}, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}},
		{"duration excludes its end", pacer{start: t0, rate: 4, dur: time.Second}, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}},
		{"thirds round to the nanosecond", pacer{start: t0, rate: 3, dur: time.Second}, []time.Duration{0, 333333333, 666666667}},
		{"slower than one a second", pacer{start: t0, rate: 0.5, dur: 5 * time.Second}, []time.Duration{0, 2 * time.Second, 4 * time.Second}},
		{"duration shorter than one interval", pacer{start: t0, rate: 1, dur: time.Millisecond}, []time.Duration{0}},
		{"count wins over the clock", pacer{start: t0, rate: 1000, n: 2}, []time.Duration{0, time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, off := range tc.want {
				got, ok := tc.p.at(i)
				if !ok || !got.Equal(t0.Add(off)) {
					t.Fatalf("arrival %d at %v (%v), want %v", i, got.Sub(t0), ok, off)
				}
			}
			if got, ok := tc.p.at(len(tc.want)); ok {
				t.Errorf("arrival %d at %v: the schedule should have ended", len(tc.want), got.Sub(t0))
			}
		})
	}
}

func TestPacerDoesNotDrift(t *testing.T) {
	// Each arrival is computed from its index: after a million arrivals at
	// 3 per second the schedule is exactly a million thirds of a second
	// on, where adding a rounded interval each time would be 1 ms off.
	t0 := time.Unix(1000, 0)
	p := pacer{start: t0, rate: 3, dur: time.Hour * 1000}
	got, ok := p.at(3_000_000)
	if !ok || got.Sub(t0) != 1_000_000*time.Second {
		t.Errorf("arrival 3,000,000 at %v, want exactly 1,000,000 s", got.Sub(t0))
	}
	prev := t0
	for i := 1; i < 10_000; i++ {
		at, _ := p.at(i)
		if d := at.Sub(prev); d < 333333333 || d > 333333334 {
			t.Fatalf("gap before arrival %d is %v", i, d)
		}
		prev = at
	}
}

func TestPlanFor(t *testing.T) {
	const n = 10_000
	count := func(ratio float64, mode AbortMode) (aborts, deletes int) {
		for i := range n {
			p := planFor(7, i, ratio, mode)
			if p.frac < 0 || p.frac >= 1 {
				t.Fatalf("abort point %g outside [0, 1)", p.frac)
			}
			if p.abort {
				aborts++
				if p.delete {
					deletes++
				}
			}
		}
		return aborts, deletes
	}
	if a, _ := count(0, AbortBoth); a != 0 {
		t.Errorf("ratio 0 aborted %d", a)
	}
	if a, d := count(1, AbortHangUp); a != n || d != 0 {
		t.Errorf("ratio 1 hang-up: %d aborts, %d deletes", a, d)
	}
	if a, d := count(1, AbortDelete); a != n || d != n {
		t.Errorf("ratio 1 delete: %d aborts, %d deletes", a, d)
	}
	// The seed is fixed, so these counts are too; the bounds are 5
	// standard deviations wide all the same.
	a, d := count(0.3, AbortBoth)
	if a < 2770 || a > 3230 {
		t.Errorf("ratio 0.3 aborted %d of %d", a, n)
	}
	if d < a/2-180 || d > a/2+180 {
		t.Errorf("%d of %d aborts by DELETE, want about half", d, a)
	}
	if planFor(7, 42, 0.5, AbortBoth) != planFor(7, 42, 0.5, AbortBoth) {
		t.Error("the same seed and index gave two plans")
	}
}
