package enhance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// speech returns seconds of a speech-band noise at rate with RMS rmsDBFS: a
// few dozen random sinusoids below 4 kHz.
func speech(rate int, seconds, rmsDBFS float64, seed uint64) []int16 {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]int16, int(seconds*float64(rate)))
	v := make([]float64, len(out))
	var power float64
	for range 40 {
		f, a, ph := 100+3900*rng.Float64(), 0.2+rng.Float64(), 2*math.Pi*rng.Float64()
		power += a * a / 2
		for i := range v {
			v[i] += a * math.Sin(2*math.Pi*f*float64(i)/float64(rate)+ph)
		}
	}
	g := 32768 * math.Pow(10, rmsDBFS/20) / math.Sqrt(power)
	for i := range v {
		out[i] = int16(math.Max(-32768, math.Min(32767, math.Round(g*v[i]))))
	}
	return out
}

func audioChunks(rate int, parts ...[]int16) []engine.Chunk {
	chunks := make([]engine.Chunk, len(parts))
	for i, p := range parts {
		chunks[i] = engine.Chunk{Audio: &engine.Audio{SampleRate: rate, Samples: slices.Clone(p)}}
	}
	return chunks
}

func newTestEnhancer(t testing.TB, opts engine.Options) *Enhancer {
	t.Helper()
	var r engine.Registry
	Register(&r)
	d, ok := r.Lookup(Name)
	if !ok {
		t.Fatalf("%s not registered", Name)
	}
	spec := engine.Spec{Name: "enhance", Input: engine.KindAudio, Output: engine.KindAudio, Options: opts}
	if err := d.Check(spec); err != nil {
		t.Fatalf("Check: %v", err)
	}
	e, err := d.New(spec)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := e.Warm(context.Background()); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e.(*Enhancer)
}

func run(t testing.TB, e *Enhancer, params string, in ...engine.Chunk) ([]engine.Chunk, error) {
	t.Helper()
	job := &engine.Job{RequestID: "r1", StageID: 2, In: engine.NewSliceSource(in...)}
	if params != "" {
		job.Params = json.RawMessage(params)
	}
	sink := &engine.SliceSink{}
	job.Out = sink
	err := e.Process(context.Background(), job)
	return sink.Chunks, err
}

func concat(t testing.TB, chunks []engine.Chunk, rate int) []int16 {
	t.Helper()
	var all []int16
	for i, c := range chunks {
		if c.Audio == nil {
			t.Fatalf("output chunk %d is %q, want audio", i, c.Kind())
		}
		if c.Audio.SampleRate != rate {
			t.Fatalf("output chunk %d is %d Hz, want %d", i, c.Audio.SampleRate, rate)
		}
		all = append(all, c.Audio.Samples...)
	}
	return all
}

func TestCheck(t *testing.T) {
	var r engine.Registry
	Register(&r)
	d, _ := r.Lookup(Name)
	tests := []struct {
		name          string
		input, output engine.Kind
		opts          engine.Options
		want          string // "" for no error
	}{
		{"defaults", engine.KindAudio, engine.KindAudio, nil, ""},
		{"all options", engine.KindAudio, engine.KindAudio, engine.Options{"sample_rate": 48000, "normalize": false, "target_dbfs": -16, "peak_dbfs": -0.5}, ""},
		{"text input", engine.KindText, engine.KindAudio, nil, `audio-enhance: input must be "audio", not "text"`},
		{"timestamps output", engine.KindAudio, engine.KindTimestamps, nil, `audio-enhance: output must be "audio", not "timestamps"`},
		{"odd rate", engine.KindAudio, engine.KindAudio, engine.Options{"sample_rate": 44101}, "audio-enhance: options: sample_rate: 44101 Hz is not offered (want one of [8000 11025 12000 16000 22050 24000 32000 44100 48000])"},
		{"unknown option", engine.KindAudio, engine.KindAudio, engine.Options{"rate": 16000}, `audio-enhance: options: json: unknown field "rate"`},
		{"bad target", engine.KindAudio, engine.KindAudio, engine.Options{"target_dbfs": 3}, "audio-enhance: options: target_dbfs: 3 is outside [-70, 0]"},
		{"target above peak", engine.KindAudio, engine.KindAudio, engine.Options{"target_dbfs": -3, "peak_dbfs": -6}, "audio-enhance: options: target_dbfs: -3 must be below peak_dbfs -6"},
		{"two errors", engine.KindAudio, engine.KindAudio, engine.Options{"sample_rate": 1, "peak_dbfs": -40}, "sample_rate: 1 Hz is not offered (want one of [8000 11025 12000 16000 22050 24000 32000 44100 48000])\npeak_dbfs: -40 is outside [-30, 0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := engine.Spec{Name: "enhance", Input: tt.input, Output: tt.output, Options: tt.opts}
			err := d.Check(spec)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check = %v, want an error containing %q", err, tt.want)
			}
			if _, errNew := d.New(spec); (errNew == nil) != (err == nil) {
				t.Errorf("New error %v disagrees with Check error %v", errNew, err)
			}
		})
	}
}

// TestProcessResamples streams 16 kHz chunks through without normalization:
// one output chunk per input chunk plus the tail, and together exactly what
// resampling everything at once gives.
func TestProcessResamples(t *testing.T) {
	e := newTestEnhancer(t, engine.Options{"normalize": false})
	x := speech(16000, 1.5, -20, 1)
	parts := [][]int16{x[:8000], x[8000:8001], x[8001:8001], x[8001:20000], x[20000:]}
	out, err := run(t, e, "", audioChunks(16000, parts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(parts)+1 {
		t.Fatalf("%d output chunks for %d input chunks, want %d", len(out), len(parts), len(parts)+1)
	}
	got := concat(t, out, 24000)
	if want := audio.Resample(x, 16000, 24000); !slices.Equal(got, want) {
		t.Errorf("streamed output (%d samples) differs from one-shot resampling (%d samples)", len(got), len(want))
	}
}

// TestProcessKeepsMarks: a sentence's end mark (and a span) comes out
// where it went in, without samples, resampled and normalized or not.
func TestProcessKeepsMarks(t *testing.T) {
	x := speech(16000, 0.5, -20, 3)
	span := &engine.Span{Start: 0, End: 3, Text: "Hi."}
	in := []engine.Chunk{
		{Audio: &engine.Audio{SampleRate: 16000, Samples: slices.Clone(x[:4000])}, Span: span},
		{Audio: &engine.Audio{SampleRate: 16000, EndOfSentence: true}},
		{Audio: &engine.Audio{SampleRate: 16000, Samples: slices.Clone(x[4000:])}},
		{Audio: &engine.Audio{SampleRate: 16000, EndOfSentence: true}},
	}
	for _, opts := range []engine.Options{{"normalize": false}, {"sample_rate": 16000}, {}} {
		out, err := run(t, newTestEnhancer(t, opts), "", in...)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range in {
			got := out[i].Audio
			if got.EndOfSentence != c.Audio.EndOfSentence || (got.EndOfSentence && len(got.Samples) > 0) || out[i].Span != c.Span {
				t.Errorf("%v: chunk %d: mark %v with %d samples, span %v; want mark %v, span %v",
					opts, i, got.EndOfSentence, len(got.Samples), out[i].Span, c.Audio.EndOfSentence, c.Span)
			}
		}
	}
}

func TestProcessNormalizes(t *testing.T) {
	e := newTestEnhancer(t, nil)
	// Leading silence, a breath too quiet to be speech, a sentence at
	// -32 dBFS, and one 6 dB quieter.
	silence := make([]int16, 4000)
	breath := speech(16000, 0.3, -60, 9)
	first := speech(16000, 1, -32, 2)
	second := speech(16000, 1, -38, 3)
	out, err := run(t, e, "", audioChunks(16000, silence, breath, first, second)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 5 {
		t.Fatalf("%d output chunks, want 5", len(out))
	}
	out = out[1:] // the silence
	loud := func(i int) float64 {
		l, ok := audio.Loudness(out[i].Audio.Samples, 24000)
		if !ok {
			t.Fatalf("output chunk %d is silent", i)
		}
		return l
	}
	// Before the first sentence the gain is unity.
	if l := loud(0); math.Abs(l+60) > 0.5 {
		t.Errorf("breath at %.2f dBFS, want it left at -60", l)
	}
	if l := loud(1); math.Abs(l-DefaultTargetDBFS) > 0.5 {
		t.Errorf("first sentence at %.2f dBFS, want %.1f±0.5", l, DefaultTargetDBFS)
	}
	// One gain for the request: the second sentence stays 6 dB below the
	// first instead of being pulled up to the target too.
	if d := loud(1) - loud(2); math.Abs(d-6) > 0.5 {
		t.Errorf("second sentence %.2f dB below the first, want 6±0.5", d)
	}
	for i, c := range out {
		for _, s := range c.Audio.Samples {
			if float64(s) > 32768*math.Pow(10, DefaultPeakDBFS/20) || float64(-int32(s)) > 32768*math.Pow(10, DefaultPeakDBFS/20) {
				t.Fatalf("chunk %d has sample %d above the peak limit", i, s)
			}
		}
	}
}

func TestProcessPeakLimit(t *testing.T) {
	// A first chunk of a quiet sentence with one loud click: the gain is
	// set from the sentence, and the click is limited, not clipped.
	e := newTestEnhancer(t, engine.Options{"sample_rate": 16000})
	x := speech(16000, 1, -40, 4)
	x[8000] = 32000
	out, err := run(t, e, "", audioChunks(16000, x)...)
	if err != nil {
		t.Fatal(err)
	}
	got := concat(t, out, 16000)
	limit := int16(math.Floor(32768 * math.Pow(10, DefaultPeakDBFS/20)))
	if hi, lo := slices.Max(got), slices.Min(got); hi > limit || lo < -limit {
		t.Errorf("samples reach %d and %d, beyond the limit ±%d", lo, hi, limit)
	}
	if got[8000] < limit*9/10 {
		t.Errorf("the click came out at %d, want it near the limit %d", got[8000], limit)
	}
}

func TestProcessParams(t *testing.T) {
	e := newTestEnhancer(t, nil)
	x := speech(16000, 0.5, -30, 5)
	tests := []struct {
		name   string
		params string
		rate   int
		check  func(t *testing.T, got []int16)
	}{
		{"passthrough", `{"sample_rate": 16000, "normalize": false}`, 16000, func(t *testing.T, got []int16) {
			if !slices.Equal(got, x) {
				t.Error("16 kHz without normalization changed the audio")
			}
		}},
		{"48k raw", `{"sample_rate": 48000, "normalize": false}`, 48000, func(t *testing.T, got []int16) {
			if want := audio.Resample(x, 16000, 48000); !slices.Equal(got, want) {
				t.Error("output differs from resampling to 48 kHz")
			}
		}},
		{"null", `null`, 24000, func(t *testing.T, got []int16) {
			if l, _ := audio.Loudness(got, 24000); math.Abs(l-DefaultTargetDBFS) > 0.5 {
				t.Errorf("loudness %.2f dBFS, want %.1f", l, DefaultTargetDBFS)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := e.CheckParams(json.RawMessage(tt.params)); err != nil {
				t.Fatalf("CheckParams: %v", err)
			}
			out, err := run(t, e, tt.params, audioChunks(16000, x)...)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, concat(t, out, tt.rate))
		})
	}
}

func TestProcessParamErrors(t *testing.T) {
	e := newTestEnhancer(t, nil)
	tests := []struct{ params, want string }{
		{`{"sample_rate": 12345}`, "invalid sampling params: sample_rate: 12345 Hz is not offered"},
		{`{"rate": 16000}`, "invalid sampling params: rate: unknown field; this stage takes only sample_rate and normalize"},
		{`{"normalize": "yes"}`, "invalid sampling params: normalize: want a boolean, got a JSON string"},
	}
	for _, tt := range tests {
		t.Run(tt.params, func(t *testing.T) {
			err := e.CheckParams(json.RawMessage(tt.params))
			var pe *engine.ParamError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckParams = %v, want a *ParamError containing %q", err, tt.want)
			}
			_, err = run(t, e, tt.params, audioChunks(16000, speech(16000, 0.1, -20, 1))...)
			if !errors.As(err, &pe) {
				t.Errorf("Process = %v, want a *ParamError", err)
			}
		})
	}
}

func TestProcessInputErrors(t *testing.T) {
	e := newTestEnhancer(t, nil)
	x := speech(16000, 0.2, -20, 6)
	tests := []struct {
		name string
		in   []engine.Chunk
		want string
		sent int // chunks sent before the error
	}{
		{"text", []engine.Chunk{{Text: &engine.Text{Text: "hi"}}}, "audio-enhance: invalid input: chunk 0 is text, want audio", 0},
		{"empty chunk", append(audioChunks(16000, x), engine.Chunk{}), "audio-enhance: invalid input: chunk 1 is empty, want audio", 1},
		{"rate change", append(audioChunks(16000, x), audioChunks(22050, x)...), "audio-enhance: invalid input: chunk 1 is 22050 Hz, but the stream started at 16000 Hz", 1},
		{"rate 0", audioChunks(0, x), "audio-enhance: invalid input: chunk 0: resample: rate 0 Hz out of range", 0},
		{"odd rate", audioChunks(16001, x), "audio-enhance: invalid input: chunk 0: resample: 16001 Hz to 24000 Hz is the ratio 24000/16001", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, e, "", tt.in...)
			var ie *engine.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Process = %v, want an *InputError containing %q", err, tt.want)
			}
			if len(out) != tt.sent {
				t.Errorf("%d chunks sent before the error, want %d", len(out), tt.sent)
			}
		})
	}
}

func TestProcessEmptyInput(t *testing.T) {
	e := newTestEnhancer(t, nil)
	out, err := run(t, e, "")
	if err != nil || len(out) != 0 {
		t.Errorf("Process of no input = %d chunks, %v; want none, nil", len(out), err)
	}
}

// blockingSource yields one chunk, then blocks until ctx ends.
type blockingSource struct{ first *engine.Chunk }

func (s *blockingSource) Recv(ctx context.Context) (engine.Chunk, error) {
	if c := s.first; c != nil {
		s.first = nil
		return *c, nil
	}
	<-ctx.Done()
	return engine.Chunk{}, ctx.Err()
}

func TestProcessCancelled(t *testing.T) {
	e := newTestEnhancer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	c := audioChunks(16000, speech(16000, 0.2, -20, 7))[0]
	sink := &cancelSink{cancel: cancel}
	err := e.Process(ctx, &engine.Job{In: &blockingSource{first: &c}, Out: sink})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Process = %v, want context.Canceled", err)
	}
	if sink.n != 1 {
		t.Errorf("%d chunks sent, want 1", sink.n)
	}
}

// cancelSink counts chunks and cancels the request at the first.
type cancelSink struct {
	n      int
	cancel context.CancelFunc
}

func (s *cancelSink) Send(ctx context.Context, c engine.Chunk) error {
	s.n++
	s.cancel()
	return nil
}

// TestProcessConcurrent runs requests with different params on one replica
// at once; each must get what it gets alone.
func TestProcessConcurrent(t *testing.T) {
	e := newTestEnhancer(t, nil)
	params := []string{"", `{"sample_rate": 16000}`, `{"sample_rate": 48000, "normalize": false}`, `{"sample_rate": 22050}`}
	inputs := make([][]engine.Chunk, len(params))
	want := make([][]engine.Chunk, len(params))
	for i, p := range params {
		x := speech(16000, 0.6, -25-float64(i), uint64(10+i))
		inputs[i] = audioChunks(16000, x[:3000], x[3000:7000], x[7000:])
		var err error
		if want[i], err = run(t, e, p, cloneChunks(inputs[i])...); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			i := g % len(params)
			got, err := run(t, e, params[i], cloneChunks(inputs[i])...)
			if err != nil {
				t.Error(err)
				return
			}
			if len(got) != len(want[i]) {
				t.Errorf("request %d: %d chunks, want %d", g, len(got), len(want[i]))
				return
			}
			for j := range got {
				if !slices.Equal(got[j].Audio.Samples, want[i][j].Audio.Samples) {
					t.Errorf("request %d (params %s): chunk %d differs from a lone run", g, params[i], j)
				}
			}
		})
	}
	wg.Wait()
}

func cloneChunks(in []engine.Chunk) []engine.Chunk {
	out := make([]engine.Chunk, len(in))
	for i, c := range in {
		out[i] = engine.Chunk{Audio: &engine.Audio{SampleRate: c.Audio.SampleRate, Samples: slices.Clone(c.Audio.Samples)}}
	}
	return out
}

func BenchmarkProcess(b *testing.B) {
	// 10 s of vocoder output in 1 s chunks, to 24 kHz with normalization.
	e := newTestEnhancer(b, nil)
	x := speech(16000, 10, -25, 1)
	parts := make([][]int16, 10)
	for i := range parts {
		parts[i] = x[i*16000 : (i+1)*16000]
	}
	b.ReportAllocs()
	b.SetBytes(int64(2 * len(x)))
	for b.Loop() {
		b.StopTimer()
		in := audioChunks(16000, parts...)
		b.StartTimer()
		if _, err := run(b, e, "", in...); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleRegister() {
	var r engine.Registry
	Register(&r)
	fmt.Println(r.Names())
	// Output: [audio-enhance]
}

// TestProcessKeepsSpans: a chunk that begins a sentence's audio (its span)
// still does after the enhancer, so the sentence's events survive it.
func TestProcessKeepsSpans(t *testing.T) {
	e := newTestEnhancer(t, nil)
	x := speech(16000, 0.5, -20, 1)
	in := audioChunks(16000, x[:4000], x[4000:])
	span := &engine.Span{Sentence: 1, Start: 6, End: 12, Text: "Second"}
	in[1].Span = span
	out, err := run(t, e, "", in...)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Span != nil || out[1].Span != span {
		t.Errorf("spans %v, %v; want none, then %+v", out[0].Span, out[1].Span, *span)
	}
}
