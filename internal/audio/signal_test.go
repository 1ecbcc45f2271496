package audio

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// Test signals. Each is a function of continuous time sampled at the rate
// asked for, so the same signal can be generated at two rates and compared
// sample by sample. All are band-limited below 7 kHz and fade in and out
// over 10 ms, as speech does, so that the edges of the stream add no energy
// above the band.

// sweep is a logarithmic sine sweep from f0 to f1 Hz at peak amplitude amp
// (relative to full scale).
func sweep(rate int, seconds, f0, f1, amp float64) []int16 {
	k := math.Log(f1 / f0)
	v := make([]float64, samplesIn(rate, seconds))
	for i := range v {
		t := float64(i) / float64(rate)
		v[i] = amp * math.Sin(2*math.Pi*f0*seconds/k*(math.Exp(t/seconds*k)-1))
	}
	return finish(rate, seconds, v)
}

// speechNoise is a noise-like signal with a speech-like spectrum: 400
// sinusoids at random frequencies from 80 Hz to 7 kHz with random phases, a
// spectrum falling 6 dB per octave above 500 Hz, and a 4 Hz syllabic
// envelope. Its RMS is about rmsDBFS.
func speechNoise(rate int, seconds float64, rmsDBFS float64, seed uint64) []int16 {
	key := noiseKey{rate, seconds, rmsDBFS, seed}
	noiseCache.Lock()
	defer noiseCache.Unlock()
	x, ok := noiseCache.m[key]
	if !ok {
		x = makeSpeechNoise(rate, seconds, rmsDBFS, seed)
		noiseCache.m[key] = x
	}
	return slices.Clone(x)
}

// noiseCache keeps the signals that several tests use: making one is costly
// under the race detector.
var noiseCache = struct {
	sync.Mutex
	m map[noiseKey][]int16
}{m: make(map[noiseKey][]int16)}

type noiseKey struct {
	rate         int
	seconds, rms float64
	seed         uint64
}

func makeSpeechNoise(rate int, seconds float64, rmsDBFS float64, seed uint64) []int16 {
	rng := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, samplesIn(rate, seconds))
	var power float64
	for range 400 {
		f := 80 * math.Pow(7000.0/80, rng.Float64())
		a := 1.0
		if f > 500 {
			a = 500 / f
		}
		power += a * a / 2
		// a*sin(w*t + ph), by rotating a phasor, which is much faster than
		// calling math.Sin and accurate to far below 16 bits here.
		ph := 2 * math.Pi * rng.Float64()
		w := 2 * math.Pi * f / float64(rate)
		re, im := a*math.Cos(ph), a*math.Sin(ph)
		c, s := math.Cos(w), math.Sin(w)
		for i := range v {
			v[i] += im
			re, im = re*c-im*s, re*s+im*c
		}
	}
	const envPower = 0.55*0.55 + 0.45*0.45/2 // mean square of the envelope
	g := math.Pow(10, rmsDBFS/20) / math.Sqrt(power*envPower)
	for i := range v {
		t := float64(i) / float64(rate)
		v[i] *= g * (0.55 + 0.45*math.Sin(2*math.Pi*4*t))
	}
	return finish(rate, seconds, v)
}

func samplesIn(rate int, seconds float64) int { return int(math.Round(seconds * float64(rate))) }

// finish applies 10 ms raised-cosine fades at both ends of v, sampled at
// rate over [0, seconds), and quantizes it (full scale ±1) to 16 bits.
func finish(rate int, seconds float64, v []float64) []int16 {
	const fadeSeconds = 0.01
	out := make([]int16, len(v))
	for i, x := range v {
		t := float64(i) / float64(rate)
		if edge := math.Min(t, seconds-t); edge < fadeSeconds {
			x *= 0.5 - 0.5*math.Cos(math.Pi*math.Max(0, edge)/fadeSeconds)
		}
		out[i] = int16(math.Max(-32768, math.Min(32767, math.Round(x*32768))))
	}
	return out
}

// snr is the ratio of ref's energy to the energy of got-ref, in dB.
func snr(ref, got []int16) float64 {
	var s, e float64
	for i := range ref {
		r := float64(ref[i])
		d := float64(got[i]) - r
		s += r * r
		e += d * d
	}
	if e == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(s/e)
}
