package loadgen

import (
	"testing"
	"time"
)

// TestPlayback: a chunk that comes before the audio before it runs out
// keeps playback going; one that comes after is an underrun, its stall
// the silence between, and playback resumes from it.
func TestPlayback(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type chunk struct{ ms, samples int }
	for _, tc := range []struct {
		name      string
		chunks    []chunk
		underruns int
		stall     time.Duration
	}{
		{"ahead", []chunk{{0, 1600}, {50, 1600}, {100, 1600}, {150, 16000}}, 0, 0},
		{"just in time", []chunk{{0, 1600}, {100, 1600}, {200, 1600}}, 0, 0},
		{"one gap", []chunk{{0, 1600}, {130, 1600}, {200, 1600}}, 1, 30 * time.Millisecond},
		// After the stall the audio runs out at 130+100+100 = 330 ms.
		{"resumes from the late chunk", []chunk{{0, 1600}, {130, 1600}, {200, 1600}, {340, 1600}}, 2, 40 * time.Millisecond},
		{"empty chunks are no audio", []chunk{{0, 0}, {500, 1600}, {600, 1600}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p playback
			for _, c := range tc.chunks {
				p.add(at(c.ms), c.samples, 16000)
			}
			if p.underruns != tc.underruns || p.stall != tc.stall {
				t.Errorf("%d underruns, %v of stall; want %d, %v", p.underruns, p.stall, tc.underruns, tc.stall)
			}
		})
	}
}
