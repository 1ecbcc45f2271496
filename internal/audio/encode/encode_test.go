package encode

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testSerial fixes opus's Ogg serial number so that its output is a
// function of its input.
const testSerial = 0x6f6d6e69

// encodeChunks encodes samples in chunks of the sizes sizes returns, in
// turn, and returns the bytes written.
func encodeChunks(t testing.TB, format string, rate int, samples []int16, opts Options, sizes func() int) []byte {
	t.Helper()
	var out bytes.Buffer
	e, err := New(format, &out, rate, opts)
	if err != nil {
		t.Fatalf("New(%s, %d Hz): %v", format, rate, err)
	}
	for len(samples) > 0 {
		n := min(sizes(), len(samples))
		if err := e.Write(samples[:n]); err != nil {
			e.Close()
			t.Fatalf("%s: Write: %v", format, err)
		}
		samples = samples[n:]
	}
	if err := e.Close(); err != nil {
		t.Fatalf("%s: Close: %v", format, err)
	}
	return out.Bytes()
}

// encodeAll encodes samples in one Write.
func encodeAll(t testing.TB, format string, rate int, samples []int16, opts Options) []byte {
	t.Helper()
	return encodeChunks(t, format, rate, samples, opts, func() int { return len(samples) })
}

func TestFormats(t *testing.T) {
	want := map[string]string{
		"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac",
		"flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm",
	}
	got := Formats()
	if len(got) != len(want) || got[0] != MP3 {
		t.Errorf("Formats() = %v, want the %d formats, mp3 first", got, len(want))
	}
	for _, f := range got {
		ct, ok := ContentType(f)
		if !ok || ct != want[f] {
			t.Errorf("ContentType(%q) = %q, %v; want %q, true", f, ct, ok, want[f])
		}
	}
	for _, f := range []string{"", "MP3", "ogg", "webm"} {
		if ct, ok := ContentType(f); ok {
			t.Errorf("ContentType(%q) = %q, true; want false", f, ct)
		}
	}
}

// chunkings are ways to split a stream into Writes.
var chunkings = []struct {
	name  string
	sizes func() func() int
}{
	{"1-2-3", func() func() int {
		n := 0
		return func() int { n = n%3 + 1; return n }
	}},
	{"prime 1009", func() func() int { return func() int { return 1009 } }},
	{"random", func() func() int {
		rng := rand.New(rand.NewPCG(1, 2))
		return func() int {
			if rng.IntN(8) == 0 {
				return 0 // an empty Write
			}
			return rng.IntN(6000)
		}
	}},
}

// TestChunking checks that the output does not depend on how the input is
// split between Writes: byte for byte, for every format.
func TestChunking(t *testing.T) {
	// 20000 Hz is no MP3 or AAC rate, so LAME and ffmpeg resample it.
	for _, rate := range []int{16000, 24000, 20000} {
		in := testSignal(rate)
		for _, format := range Formats() {
			if format == AAC && rate == 24000 {
				continue // ffmpeg is slow to start; 16 and 20 kHz suffice
			}
			t.Run(format+"/"+strconv.Itoa(rate), func(t *testing.T) {
				t.Parallel()
				if format == AAC {
					needTool(t, "ffmpeg")
				}
				opts := Options{OggSerial: testSerial, Stream: true}
				whole := encodeAll(t, format, rate, in, opts)
				if len(whole) == 0 {
					t.Fatal("no output")
				}
				for _, c := range chunkings {
					got := encodeChunks(t, format, rate, in, opts, c.sizes())
					if !bytes.Equal(got, whole) {
						t.Errorf("chunks %s: %d bytes differ from the %d of one Write (first at %d)",
							c.name, len(got), len(whole), firstDiff(got, whole))
					}
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// expectation is what decoding a format should give, measured against
// the source, at the rate the codec runs at (out). The delay of the
// decoder's output is the format's Lead.
type expectation struct {
	// pad is the most samples after the end of the source.
	pad func(out int) int
	// quality returns the least SNR and spectral SNR, in dB. The SNR is
	// checked only when the codec runs at the source's rate: two
	// resamplers shift the phase at high frequencies.
	quality func(out int) (snr, spectral float64)
}

// mp3Frame is MPEG audio's frame length at a rate: MPEG-1 Layer III
// frames hold 1152 samples, MPEG-2 and 2.5 ones 576.
func mp3Frame(out int) int { return mp3SamplesPerFrame(out) }

func zero(int) int { return 0 }

func exact(int) (float64, float64) { return math.Inf(1), math.Inf(1) }

// Measured with LAME 3.100, libopus 1.3.1 and ffmpeg 5.1 on the test
// signal and flite's speech, less 4 to 5 dB: mp3 25-26 dB (16 at 8 kHz),
// aac 22-41 dB (the least at 44.1 kHz), opus 15-22 dB with 20-26 dB
// spectral.
var expectations = map[string]expectation{
	// LAME's padding, less the decoder's delay, is left at the end of a
	// stream, which has no tag to state it (and ffmpeg 5.1 leaves it in a
	// whole file too; mpg123 removes it there).
	MP3: {mp3Frame, func(out int) (float64, float64) {
		if out <= 12000 {
			return 12, 12 // MPEG-2.5
		}
		return 20, 20
	}},
	// ADTS has nowhere to say the encoder's priming, one 1024-sample
	// frame, nor its padding to the end of the last frame.
	AAC: {func(int) int { return 1024 }, func(out int) (float64, float64) {
		return 18, 20
	}},
	// The Ogg Opus granule positions give the pre-skip and the exact
	// end, which both decoders apply. Opus keeps the spectrum better than
	// the waveform (SILK, and the resamplers to and from 48 kHz).
	Opus: {zero, func(int) (float64, float64) { return 3, 16 }},
	FLAC: {zero, exact},
	WAV:  {zero, exact},
	PCM:  {zero, exact},
}

// codecRate returns the rate format's codec runs at for input at rate.
func codecRate(format string, rate int) int {
	switch format {
	case MP3:
		return nextRate(rate, mp3Rates)
	case AAC:
		return nextRate(rate, aacRates)
	}
	return rate
}

// TestDecode decodes each format with independent decoders, as a stream
// (New with Options.Stream) and as a whole file (Whole), and measures it
// against the source: the delay is the format's Lead (0 but for aac, and
// an mp3 stream, which has no tag), the length within the codec's frame,
// and the SNR above the codec's bound at its default bitrate (exact, for
// the lossless formats).
func TestDecode(t *testing.T) {
	type source struct {
		name    string
		rate    int
		samples func(testing.TB) []int16
	}
	tones := func(rate int) source {
		return source{"tones" + strconv.Itoa(rate), rate, func(testing.TB) []int16 { return testSignal(rate) }}
	}
	sources := []source{
		{"flite16000", 16000, fliteSpeech},
		tones(16000), tones(24000), tones(8000), tones(44100), tones(20000),
	}
	for _, src := range sources {
		for _, format := range Formats() {
			for _, dec := range decoders[format] {
				out := codecRate(format, src.rate)
				if dec.name == "mpg123" && out != src.rate {
					continue // mpg123 decodes at the codec's rate
				}
				if (format == WAV || format == PCM) && src.rate != 16000 && src.rate != 20000 {
					continue // no codec: two rates suffice
				}
				for _, whole := range []bool{false, true} {
					name := src.name + "/" + format + "/" + dec.name + map[bool]string{false: "/stream", true: "/whole"}[whole]
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						in := src.samples(t)
						checkDecode(t, format, src.rate, in, Options{}, whole, dec, expectations[format])
					})
				}
			}
		}
	}
}

// checkDecode encodes in, at rate Hz, as a stream (opts.Stream) or a
// whole file, decodes it with dec and checks it against x and the
// format's Lead.
func checkDecode(t *testing.T, format string, rate int, in []int16, opts Options, whole bool, dec decoder, x expectation) {
	t.Helper()
	opts.Stream = !whole
	var data []byte
	if whole {
		var err error
		if data, err = Whole(format, rate, in, opts); err != nil {
			t.Fatal(err)
		}
	} else {
		data = encodeAll(t, format, rate, in, opts)
	}
	got := dec.decode(t, data, rate)
	out := codecRate(format, rate)
	// In samples at the source's rate.
	scale := func(n int) int { return (n*rate + out/2) / out }
	wantLag := int(math.Round(Lead(format, rate, opts).Seconds() * float64(rate)))
	pad := scale(x.pad(out))
	lag := align(in, got, rate, 4000)
	extra := len(got) - lag - len(in)
	snr, spectral := snr(in, got, lag), spectralSNR(in, got, rate, lag)
	t.Logf("%d bytes, %d samples decoded for %d: lag %d, extra %d, SNR %.1f dB, spectral %.1f dB",
		len(data), len(got), len(in), lag, extra, snr, spectral)
	// One sample of slack for rounding when resampling.
	if lag < wantLag-1 || lag > wantLag+1 {
		t.Errorf("delay %d samples, want %d (Lead %v)", lag, wantLag, Lead(format, rate, opts))
	}
	if extra < -1 || extra > pad+1 {
		t.Errorf("%d samples after the end, want 0 to %d", extra, pad)
	}
	minSNR, minSpectral := x.quality(out)
	if out != rate {
		minSNR = math.Inf(-1)
	}
	if snr < minSNR || spectral < minSpectral {
		t.Errorf("SNR %.1f dB, spectral %.1f dB, want at least %.0f and %.0f", snr, spectral, minSNR, minSpectral)
	}
}
