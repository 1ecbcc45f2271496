package audio

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestLoudness(t *testing.T) {
	const rate = 16000
	speech := speechNoise(rate, 2, -18, 1)
	withSilence := append(slices.Clone(speech), make([]int16, 2*rate)...)
	fullSine := make([]int16, rate)
	for i := range fullSine {
		fullSine[i] = int16(math.Round(32767 * math.Sin(2*math.Pi*440*float64(i)/rate)))
	}
	tests := []struct {
		name   string
		x      []int16
		want   float64
		wantOK bool
	}{
		{"speech", speech, -18, true},
		// The gates drop the silence: an ungated RMS would say -21 dBFS.
		{"speech and silence", withSilence, -18, true},
		{"full-scale sine", fullSine, -3.01, true},
		// One period of the 4 Hz envelope, shorter than a block.
		{"short", speech[rate/8 : rate/8+rate/4], -18, true},
		{"silence", make([]int16, rate), 0, false},
		{"empty", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Loudness(tt.x, rate)
			if ok != tt.wantOK || ok && math.Abs(got-tt.want) > 0.5 {
				t.Errorf("Loudness = %.2f, %v; want %.2f±0.5, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	const rate = 24000
	const peakLimit = -1.0
	for _, level := range []float64{-40, -30, -20, -12, -6} {
		for _, target := range []float64{-23, -20, -16} {
			t.Run(fmt.Sprintf("%.0f to %.0f", level, target), func(t *testing.T) {
				x := speechNoise(rate, 2, level, 2)
				gain := Normalize(x, rate, target, peakLimit)
				got, _ := Loudness(x, rate)
				if math.Abs(got-target) > 0.5 {
					t.Errorf("loudness after Normalize %.2f dBFS, want %.1f±0.5 (gain %.1f dB)", got, target, gain)
				}
				if p := peakDBFS(x); p > peakLimit {
					t.Errorf("peak %.2f dBFS above the %.1f dBFS limit", p, peakLimit)
				}
			})
		}
	}
}

// TestNormalizeLimits pushes speech far past what its peaks allow: the
// limiter must hold the peak limit without clipping or wrapping, and the
// result must be louder than lowering the gain until the peak fits would
// make it.
func TestNormalizeLimits(t *testing.T) {
	const rate = 16000
	for _, limit := range []float64{-1, -6, 0} {
		t.Run(fmt.Sprintf("limit %.0f", limit), func(t *testing.T) {
			x := speechNoise(rate, 2, -20, 3)
			orig := slices.Clone(x)
			before, _ := Loudness(x, rate)
			capped := before + limit - peakDBFS(x)
			Normalize(x, rate, -4, limit)
			if p := peakDBFS(x); p > limit {
				t.Errorf("peak %.2f dBFS above the %.1f dBFS limit", p, limit)
			}
			got, _ := Loudness(x, rate)
			t.Logf("loudness %.2f dBFS; %.2f with the gain capped by the peak", got, capped)
			if got < capped+1 || got > -4 {
				t.Errorf("loudness %.2f dBFS, want between %.2f and -4", got, capped+1)
			}
			// Limiting changes the gain, never the sign.
			for i := range x {
				if x[i] != 0 && orig[i] != 0 && (x[i] > 0) != (orig[i] > 0) {
					t.Fatalf("sample %d changed sign: %d → %d", i, orig[i], x[i])
				}
			}
		})
	}
}

func TestApplyGainUnityIsExact(t *testing.T) {
	x := speechNoise(16000, 0.5, -20, 4)
	y := slices.Clone(x)
	ApplyGain(y, 16000, 0, 0)
	if !slices.Equal(x, y) {
		t.Error("a gain of 0 dB changed samples below the limit")
	}
}

func TestApplyGainLimiterIsSmooth(t *testing.T) {
	// One loud click in quiet audio: the limiter pulls the gain down around
	// the click only, by ramps, not for the whole signal.
	const rate = 16000
	x := speechNoise(rate, 1, -30, 5)
	x[rate/2] = 30000
	ApplyGain(x, rate, 6, -1)
	if p := peakDBFS(x); p > -1 {
		t.Fatalf("peak %.2f dBFS above the limit", p)
	}
	ref := speechNoise(rate, 1, -30, 5)
	ApplyGain(ref, rate, 6, -1)
	w := int(2 * limiterSeconds * rate)
	for i := range x {
		if (i < rate/2-w-1 || i > rate/2+w+1) && x[i] != ref[i] {
			t.Fatalf("sample %d, %d ms from the click, changed", i, (i-rate/2)*1000/rate)
		}
	}
}

func peakDBFS(x []int16) float64 {
	var p int32
	for _, s := range x {
		p = max(p, abs32(s))
	}
	return 20 * math.Log10(float64(p)/32768)
}

func BenchmarkNormalize(b *testing.B) {
	x := speechNoise(24000, 10, -30, 1)
	y := make([]int16, len(x))
	for _, tt := range []struct {
		name   string
		target float64
	}{{"gain", -20}, {"limiter", -6}} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(x)))
			for b.Loop() {
				copy(y, x)
				Normalize(y, 24000, tt.target, -1)
			}
		})
	}
}
