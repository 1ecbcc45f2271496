package audio

// The resamplers' polyphase low-pass filter banks: their design, and a
// cache of them by ratio.

import (
	"fmt"
	"math"
	"sync"
)

// The low-pass filter every resampler uses, in terms of the Nyquist
// frequency of the lower of the two rates: flat up to passEdge, at least
// stopbandDB down from stopEdge on. A stopband that starts at the Nyquist
// frequency (sox's default) means nothing above it can alias back into the
// band; from 16 kHz the passband reaches 7.2 kHz, past the speech band.
const (
	passEdge   = 0.90
	stopEdge   = 1.00
	stopbandDB = 100.0
)

// Limits on what a Resampler accepts.
const (
	// MinRate and MaxRate bound the sample rates, in Hz.
	MinRate = 1000
	MaxRate = 768000
	// MaxFactor bounds L and M in the reduced ratio to/from = L/M. The
	// filter bank holds L phases, so it bounds its size too; every pair of
	// the usual rates (8 kHz to 48 kHz, 11.025 kHz and 44.1 kHz included)
	// stays below it.
	MaxFactor = 1024
)

// bank is a polyphase filter bank for one reduced ratio L/M. Output sample n
// lies at input time t = n*M/L = q + p/L; it is the dot product of row p of
// coef with the input samples q+first .. q+first+taps-1. Every row is a
// windowed sinc centred on t itself, so the filter adds no delay.
type bank struct {
	l, m  int
	taps  int       // taps per phase, a multiple of 8
	first int       // offset of a row's first tap from q
	coef  []float32 // l rows of taps coefficients
}

// last is the offset from q of a row's last tap: the look-ahead, in input
// samples, that an output needs.
func (b *bank) last() int { return b.first + b.taps - 1 }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ratio reduces to/from to L/M and checks both rates and the factors.
func ratio(from, to int) (l, m int, err error) {
	for _, r := range [2]int{from, to} {
		if r < MinRate || r > MaxRate {
			return 0, 0, fmt.Errorf("resample: rate %d Hz out of range [%d, %d]", r, MinRate, MaxRate)
		}
	}
	g := gcd(from, to)
	l, m = to/g, from/g
	if l > MaxFactor || m > MaxFactor {
		return 0, 0, fmt.Errorf("resample: %d Hz to %d Hz is the ratio %d/%d, finer than 1/%d", from, to, l, m, MaxFactor)
	}
	return l, m, nil
}

// banks caches filter banks by reduced ratio: 8 kHz → 12 kHz and
// 16 kHz → 24 kHz share one, since the design is relative to the input rate.
// The cache is bounded; when full, the oldest entry goes.
var banks = struct {
	sync.RWMutex
	m     map[[2]int]*bank
	order [][2]int
}{m: make(map[[2]int]*bank)}

const maxBanks = 16

func bankFor(l, m int) *bank {
	key := [2]int{l, m}
	banks.RLock()
	b := banks.m[key]
	banks.RUnlock()
	if b != nil {
		return b
	}
	b = design(l, m)
	banks.Lock()
	defer banks.Unlock()
	if old := banks.m[key]; old != nil {
		return old
	}
	if len(banks.order) >= maxBanks {
		delete(banks.m, banks.order[0])
		banks.order = banks.order[1:]
	}
	banks.m[key] = b
	banks.order = append(banks.order, key)
	return b
}

// design builds the bank for L/M: a Kaiser-windowed sinc low-pass (Kaiser's
// formulas for beta and length at stopbandDB), sampled at the L phases and
// scaled so that every phase has unit gain at DC.
func design(l, m int) *bank {
	// Frequencies in cycles per input sample; the lower Nyquist is
	// 0.5*scale.
	scale := math.Min(1, float64(l)/float64(m))
	cutoff := 0.5 * scale * (passEdge + stopEdge) / 2
	width := 0.5 * scale * (stopEdge - passEdge)
	beta := 0.1102 * (stopbandDB - 8.7)
	length := (stopbandDB - 7.95) / (2.285 * 2 * math.Pi * width)
	// Half the window, in input samples, rounded up so that rows come in
	// multiples of 8 taps for the unrolled dot product; a longer window
	// only deepens the stopband.
	half := int(math.Ceil(length/2/4)) * 4
	b := &bank{l: l, m: m, taps: 2 * half, first: -(half - 1)}
	b.coef = make([]float32, l*b.taps)
	row := make([]float64, b.taps)
	i0beta := besselI0(beta)
	for p := 0; p < l; p++ {
		frac := float64(p) / float64(l)
		var sum float64
		for j := range row {
			tau := float64(b.first+j) - frac
			x := tau / float64(half)
			var w float64
			if x > -1 && x < 1 {
				w = besselI0(beta*math.Sqrt(1-x*x)) / i0beta
			}
			row[j] = 2 * cutoff * sinc(2*cutoff*tau) * w
			sum += row[j]
		}
		for j, v := range row {
			b.coef[p*b.taps+j] = float32(v / sum)
		}
	}
	return b
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x *= math.Pi
	return math.Sin(x) / x
}

// besselI0 is the modified Bessel function of the first kind, order 0, by
// its power series (which converges fast for the arguments a window needs).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; k < 500; k++ {
		term *= q / float64(k*k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}
