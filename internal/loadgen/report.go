package loadgen

// The report of a run: counts, percentiles, real-time factor and the leak
// check.

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of a run. Its JSON form is what `omnistage bench
// --json` prints (README, Load and scaling): requests, ok, aborted,
// errors, rps, audio_seconds_per_second, latency_ms, ttfa_ms, underruns,
// rtf and leaks, plus duration_s, audio_seconds and the leak check's ok, error and
// bindings_by_stage.
type Report struct {
	// Requests counts the requests sent: OK + Aborted + the sum of Errors.
	Requests int `json:"requests"`
	// OK counts the requests whose stream ended cleanly with audio.
	OK int `json:"ok"`
	// Aborted counts the requests the run aborted, as Options.AbortRatio
	// asked.
	Aborted int `json:"aborted"`
	// Errors counts the failed requests by code; {} when none failed.
	Errors map[string]int `json:"errors"`
	// RPS is Requests per second of DurationS.
	RPS float64 `json:"rps"`
	// AudioSecondsPerSecond is AudioSeconds per second of DurationS.
	AudioSecondsPerSecond float64 `json:"audio_seconds_per_second"`
	// LatencyMs is the distribution of the OK requests' latencies, from
	// their start (at a fixed rate: when they were due) to their end.
	LatencyMs Percentiles `json:"latency_ms"`
	// TTFAMs is the distribution of the times to first audio of the OK
	// and aborted requests (every abort comes after the first audio).
	TTFAMs Percentiles `json:"ttfa_ms"`
	// Underruns sums up the playback of the OK and aborted requests'
	// streams.
	Underruns Underruns `json:"underruns"`
	// RTF is the real-time factor of the OK requests: their latencies
	// summed over the audio they gave summed; below 1 is faster than real
	// time. 0 when no request was OK.
	RTF float64 `json:"rtf"`
	// Leaks is the leak check after the load.
	Leaks Leaks `json:"leaks"`
	// DurationS is the run's length in seconds, from its start to the end
	// of its last request.
	DurationS float64 `json:"duration_s"`
	// AudioSeconds is the audio received by every request, aborted and
	// failed ones included.
	AudioSeconds float64 `json:"audio_seconds"`

	// Examples holds the message of the first error of each code.
	Examples map[string]string `json:"-"`
}

// Underruns sum up how the streams kept ahead of their playback: each
// played from its first audio on, in real time, with no buffer of its
// own, stalls whenever the audio before its next chunk has run out (an
// underrun) and goes on from that chunk.
type Underruns struct {
	// Requests counts the streams with at least one underrun.
	Requests int `json:"requests"`
	// Events counts the underruns of every stream.
	Events int `json:"events"`
	// StallMs is the silence they made in all, and MaxStallMs the most
	// one stream had, in milliseconds.
	StallMs    float64 `json:"stall_ms"`
	MaxStallMs float64 `json:"max_stall_ms"`
}

// add notes one stream's underruns.
func (u *Underruns) add(res Result) {
	if res.Underruns == 0 {
		return
	}
	ms := float64(res.Stall) / float64(time.Millisecond)
	u.Requests++
	u.Events += res.Underruns
	u.StallMs += ms
	u.MaxStallMs = max(u.MaxStallMs, ms)
}

// Percentiles summarize a distribution of durations, in milliseconds;
// every one is 0 for an empty distribution.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Failed reports whether the run failed: a request failed other than by
// the aborts it asked for, or the leak check failed.
func (r *Report) Failed() bool { return r.Requests != r.OK+r.Aborted || !r.Leaks.OK }

// newReport sums up the results of a run that started at start.
func newReport(start time.Time, results []Result) *Report {
	r := &Report{Requests: len(results), Errors: map[string]int{}, Examples: map[string]string{}}
	var latencies, ttfas []time.Duration
	var okLatency time.Duration
	var okAudio float64
	end := start
	for _, res := range results {
		if res.End.After(end) {
			end = res.End
		}
		r.AudioSeconds += res.AudioSeconds()
		switch res.Outcome {
		case OK:
			r.OK++
			latencies = append(latencies, res.Latency())
			ttfas = append(ttfas, res.TTFA)
			okLatency += res.Latency()
			okAudio += res.AudioSeconds()
			r.Underruns.add(res)
		case Aborted:
			r.Aborted++
			ttfas = append(ttfas, res.TTFA)
			r.Underruns.add(res)
		default:
			r.Errors[res.Code]++
			if _, ok := r.Examples[res.Code]; !ok {
				r.Examples[res.Code] = res.Msg
			}
		}
	}
	r.DurationS = end.Sub(start).Seconds()
	if r.DurationS > 0 {
		r.RPS = round(float64(r.Requests)/r.DurationS, 3)
		r.AudioSecondsPerSecond = round(r.AudioSeconds/r.DurationS, 3)
	}
	if okAudio > 0 {
		r.RTF = round(okLatency.Seconds()/okAudio, 4)
	}
	r.Underruns.StallMs = round(r.Underruns.StallMs, 3)
	r.Underruns.MaxStallMs = round(r.Underruns.MaxStallMs, 3)
	r.DurationS = round(r.DurationS, 3)
	r.AudioSeconds = round(r.AudioSeconds, 3)
	r.LatencyMs = percentiles(latencies)
	r.TTFAMs = percentiles(ttfas)
	return r
}

// percentiles returns the nearest-rank percentiles of ds (the p-th is the
// smallest value with at least p% of the values at or below it), in
// milliseconds to the microsecond. It sorts ds.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }
	return Percentiles{
		P50: ms(ds[rank(50, len(ds))]),
		P90: ms(ds[rank(90, len(ds))]),
		P99: ms(ds[rank(99, len(ds))]),
		Max: ms(ds[len(ds)-1]),
	}
}

// rank returns the 0-based index of the p-th nearest-rank percentile of n
// sorted values: ceil(p/100 * n) - 1, computed in integers so that, say,
// the 90th of 10 is exactly the 9th value.
func rank(p, n int) int {
	return max((p*n+99)/100-1, 0)
}

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	scale := math.Pow10(decimals)
	return math.Round(x*scale) / scale
}

// WriteText writes the report for a person.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	errs := r.Requests - r.OK - r.Aborted
	fmt.Fprintf(&b, "requests     %d in %.2f s: %d ok, %d aborted, %d errors\n", r.Requests, r.DurationS, r.OK, r.Aborted, errs)
	for _, code := range slices.Sorted(maps.Keys(r.Errors)) {
		fmt.Fprintf(&b, "  %-10s %d (first: %s)\n", code, r.Errors[code], r.Examples[code])
	}
	fmt.Fprintf(&b, "throughput   %.2f requests/s, %.2f s of audio per second (%.2f s in all)\n", r.RPS, r.AudioSecondsPerSecond, r.AudioSeconds)
	pct := func(name string, p Percentiles) {
		fmt.Fprintf(&b, "%-12s p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", name, p.P50, p.P90, p.P99, p.Max)
	}
	pct("latency ms", r.LatencyMs)
	pct("ttfa ms", r.TTFAMs)
	if u := r.Underruns; u.Events == 0 {
		fmt.Fprintln(&b, "underruns    none: every stream kept ahead of its playback")
	} else {
		fmt.Fprintf(&b, "underruns    %d in %d streams, %.1f ms of silence in all (at most %.1f ms in one)\n", u.Events, u.Requests, u.StallMs, u.MaxStallMs)
	}
	fmt.Fprintf(&b, "rtf          %.4f\n", r.RTF)
	if r.Leaks.OK {
		fmt.Fprintf(&b, "leak check   ok: %s\n", r.Leaks)
	} else {
		fmt.Fprintf(&b, "leak check   FAILED: %s: %s\n", r.Leaks.Error, r.Leaks)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
