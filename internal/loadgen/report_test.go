package loadgen

import (
	"math"
	"strings"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	ds := make([]time.Duration, len(v))
	for i, x := range v {
		ds[i] = time.Duration(x) * time.Millisecond
	}
	return ds
}

func seq(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = n - i // descending, so percentiles must sort
	}
	return v
}

func TestPercentiles(t *testing.T) {
	cases := []struct {
		name string
		in   []time.Duration
		want Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", ms(7), Percentiles{7, 7, 7, 7}},
		{"two", ms(9, 1), Percentiles{1, 9, 9, 9}},
		{"ten", ms(seq(10)...), Percentiles{5, 9, 10, 10}},
		{"hundred", ms(seq(100)...), Percentiles{50, 90, 99, 100}},
		{"thousand", ms(seq(1000)...), Percentiles{500, 900, 990, 1000}},
		{"outlier", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 500), Percentiles{1, 1, 500, 500}},
		{"sub-millisecond", []time.Duration{1500 * time.Microsecond, 250 * time.Microsecond}, Percentiles{0.25, 1.5, 1.5, 1.5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentiles(tc.in); got != tc.want {
				t.Errorf("percentiles = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRank(t *testing.T) {
	// The nearest rank: the smallest index with at least p% of n values
	// at or below it.
	for n := 1; n <= 300; n++ {
		for _, p := range []int{50, 90, 99, 100} {
			want := int(math.Ceil(float64(p)*float64(n)/100)) - 1
			if got := rank(p, n); got != want {
				t.Fatalf("rank(%d, %d) = %d, want %d", p, n, got, want)
			}
		}
	}
}

func TestNewReport(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(msec int) time.Time { return t0.Add(time.Duration(msec) * time.Millisecond) }
	results := []Result{
		{Outcome: OK, Start: at(0), End: at(500), TTFA: 100 * time.Millisecond, Samples: 16000, Rate: 16000},
		{Outcome: OK, Start: at(100), End: at(1100), TTFA: 300 * time.Millisecond, Samples: 32000, Rate: 16000, Underruns: 2, Stall: 30 * time.Millisecond},
		{Outcome: Aborted, Start: at(200), End: at(400), TTFA: 200 * time.Millisecond, Samples: 8000, Rate: 16000, Underruns: 1, Stall: 50 * time.Millisecond},
		{Outcome: Failed, Code: "overloaded", Msg: "busy", Start: at(300), End: at(310), Underruns: 9, Stall: time.Second},
		{Outcome: Failed, Code: "overloaded", Msg: "busy again", Start: at(400), End: at(2000)},
		{Outcome: Failed, Code: "timeout", Msg: "slow", Start: at(500), End: at(1000)},
	}
	r := newReport(t0, results)
	if r.Requests != 6 || r.OK != 2 || r.Aborted != 1 || r.Errors["overloaded"] != 2 || r.Errors["timeout"] != 1 || len(r.Errors) != 2 {
		t.Fatalf("counts: %+v", r)
	}
	if r.Examples["overloaded"] != "busy" {
		t.Errorf("example of overloaded = %q, want the first one's message", r.Examples["overloaded"])
	}
	// The run lasted from t0 to its last end, 2 s.
	if r.DurationS != 2 || r.RPS != 3 || r.AudioSeconds != 3.5 || r.AudioSecondsPerSecond != 1.75 {
		t.Errorf("duration %g s, %g rps, %g s of audio, %g per second; want 2, 3, 3.5, 1.75", r.DurationS, r.RPS, r.AudioSeconds, r.AudioSecondsPerSecond)
	}
	// 1.5 s of latency over 3 s of audio.
	if r.RTF != 0.5 {
		t.Errorf("rtf = %g, want 0.5", r.RTF)
	}
	if want := (Percentiles{500, 1000, 1000, 1000}); r.LatencyMs != want {
		t.Errorf("latency = %+v, want %+v (ok requests only)", r.LatencyMs, want)
	}
	if want := (Percentiles{200, 300, 300, 300}); r.TTFAMs != want {
		t.Errorf("ttfa = %+v, want %+v (ok and aborted requests)", r.TTFAMs, want)
	}
	if want := (Underruns{Requests: 2, Events: 3, StallMs: 80, MaxStallMs: 50}); r.Underruns != want {
		t.Errorf("underruns = %+v, want %+v (ok and aborted requests)", r.Underruns, want)
	}
	r.Leaks = Leaks{OK: true, ByStage: map[string]int{}}
	if !r.Failed() {
		t.Error("a report with errors did not fail")
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"6 in 2.00 s: 2 ok, 1 aborted, 3 errors", "overloaded 2 (first: busy)", "underruns    3 in 2 streams, 80.0 ms", "leak check   ok"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}

	clean := newReport(t0, results[:3])
	clean.Leaks = Leaks{OK: true}
	if clean.Failed() {
		t.Error("a report of ok and aborted requests with a clean leak check failed")
	}
	clean.Leaks = Leaks{InFlight: 1}
	if !clean.Failed() {
		t.Error("a report whose leak check failed did not fail")
	}
}

func TestNewReportEmpty(t *testing.T) {
	r := newReport(time.Now(), nil)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "underruns    none") || strings.Contains(b.String(), "in 0 streams") {
		t.Errorf("a report without underruns says:\n%s", b.String())
	}
	if r.Requests != 0 || r.RPS != 0 || r.RTF != 0 || r.Errors == nil {
		t.Errorf("empty report: %+v", r)
	}
}
