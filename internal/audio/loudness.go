package audio

// Loudness, measured after EBU R 128, and normalization to a target.

import (
	"math"
)

// The loudness measure, after EBU R 128 (ITU-R BS.1770) without its
// K-weighting filter: mean square over 400 ms blocks every 100 ms, blocks
// quieter than an absolute gate dropped (silence), then blocks more than
// 10 dB below the mean of the rest dropped (pauses, breaths), and the mean
// square of what is left, in dB relative to full scale. The gates make it a
// measure over the speech itself: a sentence followed by a second of silence
// measures the same as the sentence alone. Leaving out K-weighting keeps the
// measure independent of the sample rate; for speech, whose energy lies
// mostly between 100 Hz and 4 kHz, it shifts results by a near-constant
// amount that a target absorbs.
const (
	blockSeconds   = 0.4
	hopSeconds     = 0.1
	absoluteGateDB = -70.0
	relativeGateDB = -10.0
)

// limiterSeconds is the limiter's look-ahead and release: gain reduction
// ramps in over twice this before a peak and out over twice this after it.
const limiterSeconds = 0.005

// Loudness returns the gated loudness of samples at sampleRate Hz in dBFS,
// where 0 dBFS is the mean square of a full-scale square wave (a full-scale
// sine measures -3 dBFS). Audio shorter than one block is measured as a
// single block. ok is false when nothing passes the gates (silence, or no
// samples).
func Loudness(samples []int16, sampleRate int) (dbfs float64, ok bool) {
	block := int(blockSeconds * float64(sampleRate))
	hop := int(hopSeconds * float64(sampleRate))
	if len(samples) == 0 || block <= 0 || hop <= 0 {
		return 0, false
	}
	if len(samples) < block {
		ms := meanSquare(samples)
		if ms <= dbToPower(absoluteGateDB) {
			return 0, false
		}
		return powerToDB(ms), true
	}
	// Sums of squares per hop; a block is blockHops consecutive hops.
	blockHops := block / hop
	hops := make([]float64, len(samples)/hop)
	for i := range hops {
		hops[i] = meanSquare(samples[i*hop:(i+1)*hop]) / float64(blockHops)
	}
	blocks := hops[:len(hops)-blockHops+1] // reused for block powers
	for i := range blocks {
		var ms float64
		for _, h := range hops[i : i+blockHops] {
			ms += h
		}
		blocks[i] = ms
	}
	mean := gatedMean(blocks, dbToPower(absoluteGateDB))
	if mean == 0 {
		return 0, false
	}
	return powerToDB(gatedMean(blocks, mean*dbToPower(relativeGateDB))), true
}

// gatedMean is the mean of the values above gate, or 0.
func gatedMean(values []float64, gate float64) float64 {
	var sum float64
	n := 0
	for _, v := range values {
		if v > gate {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// meanSquare is the mean square of samples relative to full scale.
func meanSquare(samples []int16) float64 {
	var ss int64
	for _, s := range samples {
		ss += int64(s) * int64(s)
	}
	return float64(ss) / float64(len(samples)) / (32768 * 32768)
}

func dbToPower(db float64) float64 { return math.Pow(10, db/10) }
func powerToDB(p float64) float64  { return 10 * math.Log10(p) }

// Normalize scales samples at sampleRate Hz in place so that their
// Loudness becomes targetDBFS, with ApplyGain's peak limiter holding every
// sample within peakLimitDBFS. It returns the gain it applied, in dB;
// silence (nothing passes Loudness's gates) is left alone and gives 0. When
// the limiter has to act the result can measure slightly below the target.
func Normalize(samples []int16, sampleRate int, targetDBFS, peakLimitDBFS float64) (gainDB float64) {
	loud, ok := Loudness(samples, sampleRate)
	if !ok {
		return 0
	}
	gainDB = targetDBFS - loud
	ApplyGain(samples, sampleRate, gainDB, peakLimitDBFS)
	return gainDB
}

// ApplyGain scales samples at sampleRate Hz in place by gainDB, with a peak
// limiter: no sample leaves the range ±peakLimitDBFS (relative to 32768,
// capped at full scale), so nothing clips. Where a scaled sample would
// exceed the limit, the gain dips smoothly around it (a look-ahead limiter
// whose reduction ramps in and out over 10 ms) rather than flattening the
// peak; elsewhere the gain is exactly gainDB. Allocation happens only when
// the limiter acts.
func ApplyGain(samples []int16, sampleRate int, gainDB, peakLimitDBFS float64) {
	g := math.Pow(10, gainDB/20)
	limit := math.Min(32767, math.Floor(32768*math.Pow(10, peakLimitDBFS/20)))
	var peak int32
	for _, s := range samples {
		peak = max(peak, abs32(s))
	}
	if float64(peak)*g <= limit {
		for i, s := range samples {
			samples[i] = int16(math.Round(float64(s) * g))
		}
		return
	}
	env := limiterGain(samples, g, limit, max(1, int(limiterSeconds*float64(sampleRate))))
	for i, s := range samples {
		v := math.Round(float64(s) * g * float64(env[i]))
		// Rounding can carry a sample at the limit just past it.
		samples[i] = int16(math.Max(-limit, math.Min(limit, v)))
	}
}

func abs32(s int16) int32 {
	if s < 0 {
		return -int32(s)
	}
	return int32(s)
}

// limiterGain returns, per sample, the gain factor that keeps g*samples
// within ±limit: the factor each sample needs (1 where it needs none), its
// minimum over ±w samples, then the mean of that over ±w samples. Every
// sample in the mean's window has sample i in its minimum's window, so the
// result never exceeds what sample i needs, while it changes smoothly.
func limiterGain(samples []int16, g, limit float64, w int) []float32 {
	n := len(samples)
	need := make([]float32, n)
	for i, s := range samples {
		need[i] = 1
		if a := float64(abs32(s)) * g; a > limit {
			need[i] = float32(limit / a)
		}
	}
	// Sliding minimum over [i-w, i+w]: deque[head:] holds indices whose
	// values increase from front to back.
	minimum := make([]float32, n)
	deque := make([]int, 0, 2*w+2)
	head := 0
	next := 0 // the next index to enter the window
	for i := range n {
		for ; next < n && next <= i+w; next++ {
			for len(deque) > head && need[deque[len(deque)-1]] >= need[next] {
				deque = deque[:len(deque)-1]
			}
			if len(deque) == cap(deque) {
				deque = deque[:copy(deque, deque[head:])]
				head = 0
			}
			deque = append(deque, next)
		}
		if deque[head] < i-w {
			head++
		}
		minimum[i] = need[deque[head]]
	}
	// Moving average over [i-w, i+w], into need.
	var sum float64
	lo, hi := 0, 0 // window [lo, hi)
	for i := range n {
		for ; hi < n && hi <= i+w; hi++ {
			sum += float64(minimum[hi])
		}
		for ; lo < i-w; lo++ {
			sum -= float64(minimum[lo])
		}
		need[i] = float32(sum / float64(hi-lo))
	}
	return need
}
