package encode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// testSeconds is the length of the test signal.
const testSeconds = 3.0

// testSignal returns testSeconds of a speech-like signal at rate Hz,
// band-limited below 7 kHz (and 0.45 of the rate): silence, a voiced
// "vowel" whose pitch glides from 110 to 190 Hz with harmonics under two
// formants and a 4 Hz syllable envelope, a short pause, a chirp from 300
// Hz to 3.5 kHz, a second vowel, and silence. It is a function of time, so
// the same signal can be made at any rate.
func testSignal(rate int) []int16 {
	signals.Lock()
	defer signals.Unlock()
	x, ok := signals.m[rate]
	if !ok {
		x = makeTestSignal(rate)
		signals.m[rate] = x
	}
	return slices.Clone(x)
}

// signals keeps the test signals made so far, by rate: many tests share
// them, and making one is slow under the race detector.
var signals = struct {
	sync.Mutex
	m map[int][]int16
}{m: make(map[int][]int16)}

func makeTestSignal(rate int) []int16 {
	n := int(math.Round(testSeconds * float64(rate)))
	out := make([]int16, n)
	top := math.Min(7000, 0.45*float64(rate))
	for i := range out {
		t := float64(i) / float64(rate)
		var v float64
		switch {
		case t >= 0.25 && t < 1.25:
			v = vowel(t-0.25, 1.0, 110, 190, 700, 1200, top)
		case t >= 1.4 && t < 1.9:
			// Chirp: phase is the integral of a linear frequency sweep.
			tt, d := t-1.4, 0.5
			f0, f1 := 300.0, math.Min(3500, top)
			v = 0.3 * math.Sin(2*math.Pi*(f0*tt+(f1-f0)*tt*tt/(2*d))) * fade(tt, d)
		case t >= 2.0 && t < 2.7:
			v = vowel(t-2.0, 0.7, 160, 120, 400, 2300, top)
		}
		out[i] = int16(math.Round(v * 32767))
	}
	return out
}

// vowel is a harmonic tone of d seconds at time t whose pitch glides from
// f0 to f1 Hz, with harmonics up to top Hz shaped by formants at fa and fb.
func vowel(t, d, f0, f1, fa, fb, top float64) float64 {
	// Phase of the fundamental: the integral of the gliding pitch.
	ph := 2 * math.Pi * (f0*t + (f1-f0)*t*t/(2*d))
	f := f0 + (f1-f0)*t/d
	var v float64
	for k := 1; float64(k)*f < top; k++ {
		fk := float64(k) * f
		da, db := (fk-fa)/150, (fk-fb)/200
		a := 1/(1+da*da) + 0.5/(1+db*db) + 0.02
		v += a * math.Sin(float64(k)*ph)
	}
	env := 0.6 + 0.4*math.Sin(2*math.Pi*4*t)
	return 0.12 * v * env * fade(t, d)
}

// fade is a 10 ms raised-cosine fade in and out of a d-second sound at t.
func fade(t, d float64) float64 {
	const f = 0.01
	e := math.Min(t, d-t)
	if e >= f {
		return 1
	}
	return 0.5 - 0.5*math.Cos(math.Pi*math.Max(0, e)/f)
}

// fliteSpeech returns real speech from the flite command at 16 kHz, or
// skips the test when flite is missing.
func fliteSpeech(t testing.TB) []int16 {
	t.Helper()
	fliteOnce.Do(func() {
		path, err := exec.LookPath("flite")
		if err != nil {
			fliteErr = err
			return
		}
		out := filepath.Join(os.TempDir(), fmt.Sprintf("encode-flite-%d.wav", os.Getpid()))
		defer os.Remove(out)
		cmd := exec.Command(path, "-voice", "slt", "-t",
			"The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore.", "-o", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			fliteErr = fmt.Errorf("%w: %s", err, b)
			return
		}
		f, err := os.Open(out)
		if err != nil {
			fliteErr = err
			return
		}
		defer f.Close()
		a, err := audio.ReadWAV(f)
		if err != nil {
			fliteErr = err
			return
		}
		if a.SampleRate != 16000 {
			fliteErr = fmt.Errorf("flite spoke at %d Hz, want 16000", a.SampleRate)
			return
		}
		fliteAudio = a.Samples
	})
	if fliteErr != nil {
		testdeps.Missing(t, "no flite speech: %v", fliteErr)
	}
	return fliteAudio
}

var (
	fliteOnce  sync.Once
	fliteAudio []int16
	fliteErr   error
)

// needTool skips the test if the command name is not on PATH.
func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testdeps.Missing(t, "%s not on PATH", name)
	}
}

// run runs a decoder with stdin as its input and returns its output.
func run(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	needTool(t, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// samplesOf decodes raw 16-bit little-endian PCM.
func samplesOf(t testing.TB, b []byte) []int16 {
	t.Helper()
	s, err := audio.PCMSamples(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decoder decodes one format's bytes to mono PCM at a rate; name says who.
type decoder struct {
	name   string
	decode func(t testing.TB, data []byte, rate int) []int16
}

// ffmpegDecoder decodes any format with ffmpeg, resampling to rate.
var ffmpegDecoder = decoder{"ffmpeg", func(t testing.TB, data []byte, rate int) []int16 {
	return samplesOf(t, run(t, data, "ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin",
		"-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", fmt.Sprint(rate), "pipe:1"))
}}

// ffmpegOpusDecoder decodes Ogg Opus with ffmpeg's Ogg demuxer and
// libopus: ffmpeg 5.1's own Opus decoder gets SILK-coded sine sweeps wrong
// (spectral SNR below 0 dB against 40 with libopus, in opusenc's files as
// in these).
var ffmpegOpusDecoder = decoder{"ffmpeg-libopus", func(t testing.TB, data []byte, rate int) []int16 {
	return samplesOf(t, run(t, data, "ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin",
		"-c:a", "libopus", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", fmt.Sprint(rate), "pipe:1"))
}}

// decoders lists the independent decoders of each format: the reference
// decoder of its codec's project and ffmpeg. mpg123 decodes at the file's
// rate, which is the input rate for the rates MP3 carries.
var decoders = map[string][]decoder{
	MP3: {{"mpg123", func(t testing.TB, data []byte, rate int) []int16 {
		return samplesOf(t, run(t, data, "mpg123", "-q", "-e", "s16", "-s", "-"))
	}}, ffmpegDecoder},
	Opus: {{"opusdec", func(t testing.TB, data []byte, rate int) []int16 {
		return samplesOf(t, run(t, data, "opusdec", "--quiet", "--no-dither", "--rate", fmt.Sprint(rate), "-", "-"))
	}}, ffmpegOpusDecoder},
	FLAC: {{"flac", func(t testing.TB, data []byte, rate int) []int16 {
		return samplesOf(t, run(t, data, "flac", "-d", "-s", "-c", "--force-raw-format",
			"--endian=little", "--sign=signed", "-"))
	}}, ffmpegDecoder},
	AAC: {ffmpegDecoder},
	WAV: {{"audio.ReadWAV", func(t testing.TB, data []byte, rate int) []int16 {
		a, err := audio.ReadWAV(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return a.Samples
	}}, ffmpegDecoder},
	PCM: {{"audio.PCMSamples", func(t testing.TB, data []byte, rate int) []int16 {
		return samplesOf(t, data)
	}}},
}

// align returns the delay of got against ref, in samples, in [0, maxLag]:
// the lag at which they correlate best over 250 ms of ref's first vowel,
// normalized by got's energy there.
func align(ref, got []int16, rate, maxLag int) int {
	start := rate / 2
	win := ref[start : start+rate/4]
	n := 1
	for n < 2*len(win)+maxLag {
		n *= 2
	}
	// The cross-correlation c[lag] = sum win[i]*got[start+lag+i], as the
	// inverse FFT of conj(W)·G.
	w := make([]complex128, n)
	g := make([]complex128, n)
	for i, v := range win {
		w[i] = complex(float64(v), 0)
	}
	seg := got[min(start, len(got)):min(start+len(win)+maxLag, len(got))]
	for i, v := range seg {
		g[i] = complex(float64(v), 0)
	}
	fft(w)
	fft(g)
	for i := range w {
		w[i] = complex(real(g[i]), imag(g[i])) * complex(real(w[i]), -imag(w[i]))
		// Conjugate for the inverse transform by a forward one.
		w[i] = complex(real(w[i]), -imag(w[i]))
	}
	fft(w)
	best, bestLag := math.Inf(-1), 0
	var e float64 // energy of got over the window at lag
	for i := 0; i < len(win) && i < len(seg); i++ {
		e += float64(seg[i]) * float64(seg[i])
	}
	for lag := 0; lag <= maxLag && lag+len(win) <= len(seg); lag++ {
		if lag > 0 {
			a, b := float64(seg[lag-1]), float64(seg[lag+len(win)-1])
			e += b*b - a*a
		}
		if e <= 0 {
			continue
		}
		if v := real(w[lag]) / math.Sqrt(e); v > best {
			best, bestLag = v, lag
		}
	}
	return bestLag
}

// snr is the ratio of the energy of ref to that of got-ref, in dB, over
// ref's length, with got delayed by lag samples.
func snr(ref, got []int16, lag int) float64 {
	var s, e float64
	for i, r := range ref {
		var g float64
		if j := i + lag; j < len(got) {
			g = float64(got[j])
		}
		d := g - float64(r)
		s += float64(r) * float64(r)
		e += d * d
	}
	if e == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(s/e)
}

// recorder is an io.Writer that keeps what it is sent and can fail.
type recorder struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	failAt int // fail the failAt-th write (from 1); 0 never
}

var errRecorder = errors.New("recorder: write failed")

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.failAt > 0 && r.writes >= r.failAt {
		return 0, errRecorder
	}
	return r.buf.Write(p)
}

func (r *recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Len()
}

func (r *recorder) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// spectralSNR compares the magnitude spectra of ref and got (delayed by
// lag) in 32 ms frames: the ratio of ref's spectral energy to the energy
// of the difference of the magnitudes, in dB. Unlike snr it ignores phase,
// which perceptual codecs do not keep.
func spectralSNR(ref, got []int16, rate, lag int) float64 {
	n := 1
	for n < rate*32/1000 {
		n *= 2
	}
	win := make([]float64, n)
	for i := range win {
		win[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n))
	}
	x := make([]complex128, n)
	y := make([]complex128, n)
	var s, e float64
	for start := 0; start+n <= len(ref); start += n / 2 {
		for i := range n {
			x[i] = complex(float64(ref[start+i])*win[i], 0)
			var g float64
			if j := start + i + lag; j < len(got) {
				g = float64(got[j])
			}
			y[i] = complex(g*win[i], 0)
		}
		fft(x)
		fft(y)
		for k := range n/2 + 1 {
			a, b := cmplxAbs(x[k]), cmplxAbs(y[k])
			s += a * a
			e += (a - b) * (a - b)
		}
	}
	if e == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(s/e)
}

func cmplxAbs(c complex128) float64 { return math.Hypot(real(c), imag(c)) }

// fft is an in-place radix-2 FFT; len(x) is a power of two.
func fft(x []complex128) {
	n := len(x)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	for size := 2; size <= n; size <<= 1 {
		w := complex(math.Cos(-2*math.Pi/float64(size)), math.Sin(-2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			wk := complex(1, 0)
			for k := range size / 2 {
				a, b := x[start+k], x[start+k+size/2]*wk
				x[start+k], x[start+k+size/2] = a+b, a-b
				wk *= w
			}
		}
	}
}
