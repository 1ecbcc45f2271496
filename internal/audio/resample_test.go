package audio

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestResampleRoundTripSNR(t *testing.T) {
	// 75 dB is sox's level. At -30 dBFS the 16-bit samples between the two
	// conversions bound the SNR to the 70s, so that signal gets a lower
	// floor, still above the 60 dB that speech needs.
	signals := []struct {
		name   string
		x      []int16
		minSNR float64
	}{
		{"sweep", sweep(16000, 2, 50, 7000, 0.5), 75},
		{"speech noise", speechNoise(16000, 2, -18, 1), 75},
		{"quiet speech noise", speechNoise(16000, 2, -30, 2), 70},
	}
	for _, mid := range []int{24000, 22050, 48000} {
		for _, sig := range signals {
			t.Run(fmt.Sprintf("16000-%d-16000/%s", mid, sig.name), func(t *testing.T) {
				y := Resample(Resample(sig.x, 16000, mid), mid, 16000)
				if len(y) != len(sig.x) {
					t.Fatalf("round trip gave %d samples, want %d", len(y), len(sig.x))
				}
				got := snr(sig.x, y)
				t.Logf("SNR %.1f dB", got)
				if got < sig.minSNR {
					t.Errorf("SNR %.1f dB, want at least %.0f dB", got, sig.minSNR)
				}
			})
		}
	}
}

// TestResampleNoDelay compares resampled audio with the same signal rendered
// directly at the output rate. A time shift of a microsecond would cost the
// 7 kHz content 27 dB, so a high SNR means the output samples sit at exactly
// the right times, for integer and fractional ratios alike.
func TestResampleNoDelay(t *testing.T) {
	const minSNR = 75
	pairs := [][2]int{{16000, 24000}, {16000, 22050}, {16000, 44100}, {16000, 48000}, {24000, 16000}, {22050, 16000}, {48000, 16000}, {44100, 22050}}
	for _, p := range pairs {
		t.Run(fmt.Sprintf("%d-%d", p[0], p[1]), func(t *testing.T) {
			x := speechNoise(p[0], 1, -18, 3)
			want := speechNoise(p[1], 1, -18, 3)
			got := Resample(x, p[0], p[1])
			if len(got) != len(want) {
				t.Fatalf("got %d samples, want %d", len(got), len(want))
			}
			s := snr(want, got)
			t.Logf("SNR against direct rendering %.1f dB", s)
			if s < minSNR {
				t.Errorf("SNR against direct rendering %.1f dB, want at least %d dB", s, minSNR)
			}
		})
	}
}

func TestResampleImpulse(t *testing.T) {
	tests := []struct {
		from, to int
		at, want int // input index, expected output index
	}{
		{16000, 24000, 1000, 1500},
		{16000, 48000, 1000, 3000},
		{24000, 16000, 1500, 1000},
		{48000, 16000, 3000, 1000},
		{16000, 22050, 640, 882},
		{22050, 16000, 882, 640},
		{44100, 48000, 1470, 1600},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d", tt.from, tt.to), func(t *testing.T) {
			x := make([]int16, 3*tt.at)
			x[tt.at] = 16000
			y := Resample(x, tt.from, tt.to)
			peak := 0
			for i, v := range y {
				if v > y[peak] {
					peak = i
				}
			}
			if peak != tt.want {
				t.Fatalf("impulse at input %d peaks at output %d, want %d", tt.at, peak, tt.want)
			}
			// A filter centred on each output's time is symmetric around
			// the impulse: no group delay, no skew.
			for d := 1; d < 60; d++ {
				if a, b := y[peak-d], y[peak+d]; a-b > 1 || b-a > 1 {
					t.Fatalf("response not symmetric: y[peak-%d]=%d, y[peak+%d]=%d", d, a, d, b)
				}
			}
		})
	}
}

var ratePairs = [][2]int{
	{16000, 24000}, {24000, 16000}, {16000, 22050}, {22050, 16000}, {48000, 8000},
	{8000, 48000}, {44100, 48000}, {48000, 44100}, {16000, 16000}, {11025, 8000},
}

func TestResampleLength(t *testing.T) {
	lengths := []int{0, 1, 2, 3, 5, 7, 100, 159, 160, 161, 441, 16000, 16001, 48001}
	for _, p := range ratePairs {
		for _, n := range lengths {
			// round(n*to/from), half up.
			r := new(big.Rat).SetFrac64(int64(n)*int64(p[1]), int64(p[0]))
			r.Add(r, big.NewRat(1, 2))
			want := int(new(big.Int).Quo(r.Num(), r.Denom()).Int64())
			if got := OutputLen(n, p[0], p[1]); got != want {
				t.Errorf("OutputLen(%d, %d, %d) = %d, want %d", n, p[0], p[1], got, want)
			}
			if got := len(Resample(make([]int16, n), p[0], p[1])); got != want {
				t.Errorf("%d samples %d→%d Hz: got %d samples, want %d", n, p[0], p[1], got, want)
			}
		}
	}
}

func TestResamplerChunkedEqualsOneShot(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, p := range ratePairs {
		t.Run(fmt.Sprintf("%d-%d", p[0], p[1]), func(t *testing.T) {
			x := speechNoise(p[0], 0.7, -12, 4)
			want := Resample(x, p[0], p[1])
			r, err := NewResampler(p[0], p[1])
			if err != nil {
				t.Fatal(err)
			}
			// Twice, to check that Flush leaves r ready for a new stream.
			for pass := range 2 {
				var got []int16
				for in := x; len(in) > 0; {
					n := min(len(in), []int{0, 1, 2, 3, 17, 160, 441, 1000, 5000}[rng.IntN(9)])
					got = append(got, r.Process(in[:n])...)
					in = in[n:]
				}
				got = append(got, r.Flush()...)
				if !slices.Equal(got, want) {
					t.Fatalf("pass %d: chunked output differs from one-shot (%d vs %d samples, first difference at %d)",
						pass, len(got), len(want), firstDiff(got, want))
				}
			}
		})
	}
}

func firstDiff(a, b []int16) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestResamplerLatency checks that Process holds back no more than the
// filter's look-ahead.
func TestResamplerLatency(t *testing.T) {
	r, err := NewResampler(16000, 24000)
	if err != nil {
		t.Fatal(err)
	}
	x := speechNoise(16000, 0.2, -12, 5)
	out := r.Process(x)
	held := OutputLen(len(x), 16000, 24000) - len(out)
	// The look-ahead is the last tap's offset in input samples (68, 4 ms),
	// 102 samples at 24 kHz.
	if want := OutputLen(r.b.last(), 16000, 24000); held < want || held > want+1 {
		t.Errorf("Process held back %d output samples, want %d", held, want)
	}
}

func TestResamplerAppendDoesNotAllocate(t *testing.T) {
	r, err := NewResampler(16000, 24000)
	if err != nil {
		t.Fatal(err)
	}
	x := speechNoise(16000, 0.02, -12, 6)
	dst := make([]int16, 0, 2*len(x))
	r.AppendProcess(dst, x)
	allocs := testing.AllocsPerRun(100, func() {
		dst = r.AppendProcess(dst[:0], x)
	})
	if allocs != 0 {
		t.Errorf("AppendProcess allocated %.1f times per call, want 0", allocs)
	}
}

func TestResampleIdentity(t *testing.T) {
	x := speechNoise(16000, 0.1, -12, 8)
	y := Resample(x, 16000, 16000)
	if !slices.Equal(x, y) {
		t.Fatal("16000→16000 changed the samples")
	}
	y[0]++
	if x[0] == y[0] {
		t.Fatal("Resample returned its input slice")
	}
}

func TestResampleFullScaleDoesNotWrap(t *testing.T) {
	// A full-scale square wave overshoots after filtering; the overshoot
	// must clip, not wrap around to the other sign.
	x := make([]int16, 1600)
	for i := range x {
		x[i] = 32767
		if i/40%2 == 1 {
			x[i] = -32768
		}
	}
	y := Resample(x, 16000, 24000)
	for i := 30; i < len(y)-30; i++ {
		mid := i % 60
		if mid < 10 || mid > 50 && mid < 70 || mid > 20 && mid < 40 {
			continue // near an edge of the square
		}
		if want := i/60%2 == 0; (y[i] > 0) != want || y[i] > -20000 && y[i] < 20000 {
			t.Fatalf("y[%d] = %d inside a half period of sign %v", i, y[i], want)
		}
	}
}

func TestNewResamplerErrors(t *testing.T) {
	tests := []struct {
		from, to int
		want     string
	}{
		{0, 16000, "rate 0 Hz out of range"},
		{16000, -1, "rate -1 Hz out of range"},
		{999, 16000, "rate 999 Hz out of range"},
		{16000, 800000, "rate 800000 Hz out of range"},
		{16000, 44101, "ratio 44101/16000"},
	}
	for _, tt := range tests {
		_, err := NewResampler(tt.from, tt.to)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewResampler(%d, %d) = %v, want an error containing %q", tt.from, tt.to, err, tt.want)
		}
		if err2 := CheckRates(tt.from, tt.to); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("CheckRates(%d, %d) = %v, want %v", tt.from, tt.to, err2, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Resample with a bad rate did not panic")
		}
	}()
	Resample(nil, 0, 16000)
}

func TestResampleConcurrent(t *testing.T) {
	x := speechNoise(16000, 0.3, -12, 9)
	want := map[int][]int16{}
	rates := []int{24000, 22050, 48000, 44100, 8000}
	for _, to := range rates {
		want[to] = Resample(x, 16000, to)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			to := rates[i%len(rates)]
			if got := Resample(x, 16000, to); !slices.Equal(got, want[to]) {
				t.Errorf("concurrent 16000→%d differs", to)
			}
		})
	}
	wg.Wait()
}

func BenchmarkResample(b *testing.B) {
	for _, p := range [][2]int{{16000, 24000}, {24000, 16000}, {16000, 22050}, {16000, 48000}} {
		b.Run(fmt.Sprintf("%d-%d", p[0], p[1]), func(b *testing.B) {
			x := speechNoise(p[0], 10, -18, 1)
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(x)))
			for b.Loop() {
				Resample(x, p[0], p[1])
			}
		})
	}
}

// BenchmarkResamplerStream resamples 10 s in 20 ms chunks into a reused
// buffer, as the enhance engine does per chunk.
func BenchmarkResamplerStream(b *testing.B) {
	x := speechNoise(16000, 10, -18, 1)
	r, err := NewResampler(16000, 24000)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]int16, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(2 * len(x)))
	for b.Loop() {
		for in := x; len(in) > 0; in = in[min(320, len(in)):] {
			dst = r.AppendProcess(dst[:0], in[:min(320, len(in))])
		}
		dst = r.AppendFlush(dst[:0])
	}
}
