package sphinx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite"
)

// Sentences for the accuracy tests: plain words, numbers, money, dates,
// abbreviations, contractions and punctuation that makes flite pause.
var sentences = []string{
	"The quick brown fox jumps over the lazy dog.",
	"It cost $5.50 on Jan. 3rd, 2024; Dr. Smith didn't mind!",
	"Please call Stella. Ask her to bring these things with her from the store: six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob.",
	"In 1997, the company's revenue grew by 12% to 3.4 million dollars.",
}

// maxMeanErrorMs is the largest mean boundary error, against flite's own
// word times, that the accuracy tests accept.
const maxMeanErrorMs = 15

var shared struct {
	once sync.Once
	a    *Aligner
	err  error
}

// sharedAligner returns one warmed aligner with two decoders for the
// tests that do not need their own.
func sharedAligner(t testing.TB) *Aligner {
	t.Helper()
	shared.once.Do(func() {
		shared.a, shared.err = New(spec(engine.Options{"decoders": 2}))
		if shared.err == nil {
			shared.err = shared.a.Warm(context.Background())
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.a
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.a != nil {
		shared.a.Close()
	}
	if sharedRec.r != nil {
		sharedRec.r.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func spec(o engine.Options) engine.Spec {
	return engine.Spec{Name: "aligner", Input: engine.KindAudio, Output: engine.KindTimestamps, Options: o}
}

type speech struct {
	audio *engine.Audio
	// truth is flite's own time for each spoken word; entries groups it
	// by input token, as Process reports timestamps.
	truth, entries []engine.Word
}

var speeches struct {
	sync.Mutex
	m map[[2]string]speech
}

// synth returns flite's audio for text in voice and its ground-truth word
// times, synthesized once per test binary.
func synth(t testing.TB, text, voice string) speech {
	t.Helper()
	speeches.Lock()
	defer speeches.Unlock()
	if s, ok := speeches.m[[2]string{text, voice}]; ok {
		return s
	}
	a, truth, err := flite.SynthesizeTimed(text, voice, 1)
	if err != nil {
		t.Fatal(err)
	}
	words, err := transcript(text, voice)
	if err != nil {
		t.Fatal(err)
	}
	if len(words) != len(truth) {
		t.Fatalf("%q: the transcript has %d words, flite spoke %d", text, len(words), len(truth))
	}
	if speeches.m == nil {
		speeches.m = make(map[[2]string]speech)
	}
	s := speech{a, truth, entries(text, words, truth)}
	speeches.m[[2]string{text, voice}] = s
	return s
}

// run aligns chunks with text and returns the timestamps of every chunk
// Process sent, joined.
func run(ctx context.Context, a *Aligner, text string, chunks ...engine.Chunk) ([]engine.Word, error) {
	sink := &engine.SliceSink{}
	err := a.Process(ctx, &engine.Job{
		Prompt: engine.Prompt{Text: text},
		In:     engine.NewSliceSource(chunks...),
		Out:    sink,
	})
	if err != nil {
		return nil, err
	}
	for _, c := range sink.Chunks {
		if c.Words == nil || len(c.Words.Words) == 0 {
			return nil, fmt.Errorf("chunk %q: want timestamps, never empty", c.Kind())
		}
	}
	if len(sink.Chunks) == 0 {
		return nil, errors.New("no timestamps chunk")
	}
	return engine.JoinWords(sink.Chunks), nil
}

// runWords aligns chunks with text as Process does, and returns a
// timestamp per spoken word (before Process groups them by token).
func runWords(ctx context.Context, a *Aligner, text string, chunks ...engine.Chunk) ([]engine.Word, error) {
	words, err := transcript(text, a.opts.Voice)
	if err != nil {
		return nil, err
	}
	pcm, durMs, err := readAudio(ctx, engine.NewSliceSource(chunks...))
	if err != nil {
		return nil, err
	}
	return a.align(ctx, words, pcm, durMs)
}

// checkWords fails t unless got has one monotonic entry per truth entry,
// with the same text, span and spoken words, within durMs; it returns the
// mean absolute boundary error in milliseconds.
func checkWords(t *testing.T, got, truth []engine.Word, durMs int) float64 {
	t.Helper()
	return boundaryError(t, got, truth, durMs, func(g, w engine.Word) bool {
		return g.Word == w.Word && g.CharStart == w.CharStart && g.CharEnd == w.CharEnd && slices.Equal(g.Spoken, w.Spoken)
	})
}

// boundaryError fails t unless got is monotonic within durMs and has one
// entry per truth entry, same as it; it returns the mean absolute
// boundary error in milliseconds.
func boundaryError(t *testing.T, got, truth []engine.Word, durMs int, same func(g, w engine.Word) bool) float64 {
	t.Helper()
	checkShape(t, got, durMs)
	if len(got) != len(truth) {
		t.Fatalf("got %d words, want %d:\n got %v\nwant %v", len(got), len(truth), got, truth)
	}
	sum := 0.0
	for i, g := range got {
		if w := truth[i]; !same(g, w) {
			t.Errorf("word %d is %+v, want %+v", i, g, w)
		}
		sum += math.Abs(float64(g.StartMs-truth[i].StartMs)) + math.Abs(float64(g.EndMs-truth[i].EndMs))
	}
	return sum / float64(2*len(got))
}

// checkShape fails t unless words are monotonic and within [0, durMs].
func checkShape(t *testing.T, words []engine.Word, durMs int) {
	t.Helper()
	prev := 0
	for i, w := range words {
		if w.StartMs < prev || w.EndMs < w.StartMs || w.EndMs > durMs {
			t.Fatalf("word %d %v breaks monotonic order within [0, %d] (previous end %d)", i, w, durMs, prev)
		}
		prev = w.EndMs
	}
}

// checkSpoken is checkWords for a timestamp per spoken word.
func checkSpoken(t *testing.T, got, truth []engine.Word, durMs int) float64 {
	t.Helper()
	return boundaryError(t, got, truth, durMs, func(g, w engine.Word) bool { return g.Word == w.Word })
}

func durationMs(a *engine.Audio) int { return len(a.Samples) * 1000 / a.SampleRate }

func TestAccuracy(t *testing.T) {
	a := sharedAligner(t)
	for _, voice := range []string{"slt", "rms", "awb", "kal16"} {
		t.Run(voice, func(t *testing.T) {
			sum, n := 0.0, 0
			for _, text := range sentences {
				s := synth(t, text, voice)
				got, err := runWords(context.Background(), a, text, engine.Chunk{Audio: s.audio})
				if err != nil {
					t.Fatal(err)
				}
				mean := checkSpoken(t, got, s.truth, durationMs(s.audio))
				sum += mean * float64(len(got))
				n += len(got)
			}
			mean := sum / float64(n)
			t.Logf("%s: mean boundary error %.1f ms over %d words", voice, mean, n)
			if mean > maxMeanErrorMs {
				t.Errorf("%s: mean boundary error %.1f ms, want <= %d", voice, mean, maxMeanErrorMs)
			}
		})
	}
}

// TestNormalizedWords checks that an entry is an input token, with the
// words spoken for it.
func TestNormalizedWords(t *testing.T) {
	a := sharedAligner(t)
	text := "It costs $5, OK?"
	s := synth(t, text, "slt")
	got, err := run(context.Background(), a, text, engine.Chunk{Audio: s.audio})
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, w := range got {
		entries = append(entries, fmt.Sprintf("%s@%d-%d:%s", w.Word, w.CharStart, w.CharEnd, strings.Join(w.Spoken, "+")))
	}
	if want := []string{"It@0-2:it", "costs@3-8:costs", "$5@9-11:five+dollars", "OK@13-15:ok"}; !reflect.DeepEqual(entries, want) {
		t.Errorf("entries %q, want %q", entries, want)
	}
}

func TestSampleRates(t *testing.T) {
	a := sharedAligner(t)
	text := sentences[1]
	s := synth(t, text, "slt")
	for _, rate := range []int{16000, 8000, 11025, 22050, 24000, 44100, 48000, 96000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			in := &engine.Audio{SampleRate: rate, Samples: audio.Resample(s.audio.Samples, s.audio.SampleRate, rate)}
			got, err := run(context.Background(), a, text, engine.Chunk{Audio: in})
			if err != nil {
				t.Fatal(err)
			}
			mean := checkWords(t, got, s.entries, durationMs(in))
			t.Logf("%d Hz: mean boundary error %.1f ms", rate, mean)
			// Below 16 kHz the speech has lost part of the model's band.
			limit := float64(maxMeanErrorMs)
			if rate < 16000 {
				limit *= 2
			}
			if mean > limit {
				t.Errorf("mean boundary error %.1f ms, want <= %.0f", mean, limit)
			}
		})
	}
}

// TestChunking checks that the result does not depend on how the audio is
// cut into chunks.
func TestChunking(t *testing.T) {
	a := sharedAligner(t)
	text := sentences[0]
	s := synth(t, text, "rms")
	for _, rate := range []int{16000, 24000} {
		samples := audio.Resample(s.audio.Samples, s.audio.SampleRate, rate)
		whole, err := run(context.Background(), a, text, engine.Chunk{Audio: &engine.Audio{SampleRate: rate, Samples: samples}})
		if err != nil {
			t.Fatal(err)
		}
		var chunks []engine.Chunk
		for i, n := 0, 1; i < len(samples); i, n = i+n, n*3%4001+1 {
			chunks = append(chunks, engine.Chunk{Audio: &engine.Audio{SampleRate: rate, Samples: samples[i:min(i+n, len(samples))]}})
		}
		chunks = append(chunks, engine.Chunk{Audio: &engine.Audio{SampleRate: rate}})
		cut, err := run(context.Background(), a, text, chunks...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole, cut) {
			t.Errorf("%d Hz in %d chunks:\n got %v\nwant %v", rate, len(chunks), cut, whole)
		}
	}
}

// TestOutOfVocabulary aligns words the dictionary lacks, with the phones
// flite gives them.
func TestOutOfVocabulary(t *testing.T) {
	a, err := New(spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	text := "The zorblaxian quenched a flimbergast near Omnistage."
	s := synth(t, text, "slt")
	got, err := run(context.Background(), a, text, engine.Chunk{Audio: s.audio})
	if err != nil {
		t.Fatal(err)
	}
	mean := checkWords(t, got, s.entries, durationMs(s.audio))
	t.Logf("mean boundary error %.1f ms", mean)
	if mean > maxMeanErrorMs {
		t.Errorf("mean boundary error %.1f ms, want <= %d", mean, maxMeanErrorMs)
	}
	d := <-a.pool.idle
	defer func() { a.pool.idle <- d }()
	if d.added < 3 {
		t.Errorf("the decoder added %d words, want at least 3", d.added)
	}
}

func TestBadInput(t *testing.T) {
	a := sharedAligner(t)
	s := synth(t, sentences[0], "slt")
	second := &engine.Audio{SampleRate: 16000, Samples: make([]int16, 16000)}
	long := make([]engine.Chunk, MaxAudioSeconds+1)
	for i := range long {
		long[i] = engine.Chunk{Audio: second}
	}
	tests := []struct {
		name   string
		text   string
		params string
		chunks []engine.Chunk
		want   string
	}{
		{name: "empty transcript", text: "", chunks: []engine.Chunk{{Audio: s.audio}}, want: "text is empty"},
		{name: "blank transcript", text: " \n\t ", chunks: []engine.Chunk{{Audio: s.audio}}, want: "text is empty"},
		{name: "punctuation only", text: "?! ...", chunks: []engine.Chunk{{Audio: s.audio}}, want: "nothing to speak"},
		{name: "invalid UTF-8", text: "hello \xff", chunks: []engine.Chunk{{Audio: s.audio}}, want: "UTF-8"},
		{name: "NUL", text: "hello\x00world", chunks: []engine.Chunk{{Audio: s.audio}}, want: "NUL"},
		{name: "too long transcript", text: strings.Repeat("word ", flite.MaxTextRunes), chunks: []engine.Chunk{{Audio: s.audio}}, want: "characters long"},
		{name: "no audio", text: "hello", want: "no audio"},
		{name: "empty audio", text: "hello", chunks: []engine.Chunk{{Audio: &engine.Audio{SampleRate: 16000}}}, want: "no audio"},
		{name: "text chunk", text: "hello", chunks: []engine.Chunk{{Text: &engine.Text{Text: "hello"}}}, want: "must be audio"},
		{name: "500 Hz", text: "hello", chunks: []engine.Chunk{{Audio: &engine.Audio{SampleRate: 500, Samples: make([]int16, 800)}}}, want: "outside"},
		{name: "1 MHz", text: "hello", chunks: []engine.Chunk{{Audio: &engine.Audio{SampleRate: 1000000, Samples: make([]int16, 800)}}}, want: "outside"},
		{name: "an odd rate", text: "hello", chunks: []engine.Chunk{{Audio: &engine.Audio{SampleRate: 16001, Samples: make([]int16, 800)}}}, want: "finer than"},
		{name: "zero rate", text: "hello", chunks: []engine.Chunk{{Audio: &engine.Audio{Samples: make([]int16, 800)}}}, want: "outside"},
		{name: "rate changes", text: "hello", chunks: []engine.Chunk{{Audio: second}, {Audio: &engine.Audio{SampleRate: 24000, Samples: make([]int16, 800)}}}, want: "changed from 16000 Hz to 24000 Hz"},
		{name: "too long audio", text: "hello", chunks: long, want: "longer than"},
		{name: "unknown param", text: "hello", params: `{"voice":"slt"}`, chunks: []engine.Chunk{{Audio: s.audio}}, want: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &engine.SliceSink{}
			err := a.Process(context.Background(), &engine.Job{
				Prompt: engine.Prompt{Text: tt.text},
				Params: json.RawMessage(tt.params),
				In:     engine.NewSliceSource(tt.chunks...),
				Out:    sink,
			})
			var ie *engine.InputError
			var pe *engine.ParamError
			if !errors.As(err, &ie) && !errors.As(err, &pe) {
				t.Fatalf("error %v, want an *engine.InputError or *engine.ParamError", err)
			}
			if !strings.HasPrefix(err.Error(), Name+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to start with %q and contain %q", err, Name+": ", tt.want)
			}
			if len(sink.Chunks) != 0 {
				t.Errorf("sent %d chunks", len(sink.Chunks))
			}
		})
	}
}

// TestNoAlignment feeds a second of speech with a transcript far too long
// for it: the decoder cannot reach the grammar's end.
func TestNoAlignment(t *testing.T) {
	short := synth(t, "Hello.", "slt")
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 6)
	words, err := transcript(text, "slt")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("split", func(t *testing.T) {
		a := sharedAligner(t)
		got, err := run(context.Background(), a, text, engine.Chunk{Audio: short.audio})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(words) {
			t.Fatalf("got %d words, want %d", len(got), len(words))
		}
		checkShape(t, got, durationMs(short.audio))
		for i, w := range got {
			if !slices.Equal(w.Spoken, []string{words[i].name}) || w.EndMs <= w.StartMs {
				t.Errorf("word %d is %v, want %q spoken with a non-empty span", i, w, words[i].name)
			}
		}
		// The split covers the speech, not the silence around it.
		if got[0].StartMs < 100 || got[len(got)-1].EndMs > durationMs(short.audio)-50 {
			t.Errorf("split spans %d..%d ms of %d ms: it should skip the leading and trailing silence", got[0].StartMs, got[len(got)-1].EndMs, durationMs(short.audio))
		}
	})

	t.Run("error", func(t *testing.T) {
		a, err := New(spec(engine.Options{"fallback": FallbackError}))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		_, err = run(context.Background(), a, text, engine.Chunk{Audio: short.audio})
		var ie *engine.InputError
		if !errors.Is(err, ErrNoAlignment) || !errors.As(err, &ie) {
			t.Fatalf("error %v, want ErrNoAlignment and an *engine.InputError", err)
		}
		// The decoder is still good.
		s := synth(t, sentences[0], "slt")
		got, err := run(context.Background(), a, sentences[0], engine.Chunk{Audio: s.audio})
		if err != nil {
			t.Fatal(err)
		}
		checkWords(t, got, s.entries, durationMs(s.audio))
	})
}

// TestConcurrent runs requests from several goroutines on one replica
// with two decoders, speech as the vocoder sends it and whole, and
// compares each result with a lone run's.
func TestConcurrent(t *testing.T) {
	a := sharedAligner(t)
	type job struct {
		text, voice string
		chunks      []engine.Chunk
	}
	jobs := []job{
		{text: sentences[0], voice: "slt"},
		{text: sentences[1], voice: "kal16"},
		{text: sentences[3], voice: "awb"},
		{text: committee, voice: "rms"},
		{text: sentences[2], voice: "slt"},
	}
	want := make([][]engine.Word, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if i < 3 {
			j.chunks = []engine.Chunk{{Audio: synth(t, j.text, j.voice).audio}}
		} else {
			j.chunks = speakSentences(t, j.text, j.voice).chunks()
		}
		var err error
		if want[i], err = run(context.Background(), a, j.text, j.chunks...); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, rounds = 6, 2
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds)
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				i := (g + r) % len(jobs)
				j := jobs[i]
				got, err := run(context.Background(), a, j.text, j.chunks...)
				if err != nil {
					errs <- err
					continue
				}
				if !reflect.DeepEqual(got, want[i]) {
					errs <- fmt.Errorf("goroutine %d round %d (%s): got %v, want %v", g, r, j.voice, got, want[i])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(a.pool.idle); n > 2 {
		t.Errorf("pool holds %d idle decoders, want at most 2", n)
	}
}

// blockingSource yields nothing until ctx ends.
type blockingSource struct{}

func (blockingSource) Recv(ctx context.Context) (engine.Chunk, error) {
	<-ctx.Done()
	return engine.Chunk{}, ctx.Err()
}

func TestCancel(t *testing.T) {
	a, err := New(spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := synth(t, sentences[0], "slt")

	t.Run("while reading", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := a.Process(ctx, &engine.Job{Prompt: engine.Prompt{Text: "hello"}, In: blockingSource{}, Out: &engine.SliceSink{}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want context.DeadlineExceeded", err)
		}
	})

	t.Run("while waiting for a decoder", func(t *testing.T) {
		d, err := a.pool.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = run(ctx, a, sentences[0], engine.Chunk{Audio: s.audio})
		a.pool.put(d)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want context.DeadlineExceeded", err)
		}
	})

	got, err := run(context.Background(), a, sentences[0], engine.Chunk{Audio: s.audio})
	if err != nil {
		t.Fatal(err)
	}
	checkWords(t, got, s.entries, durationMs(s.audio))
}

func TestClose(t *testing.T) {
	a, err := New(spec(engine.Options{"decoders": 2}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(a.pool.idle); n != 1 {
		t.Errorf("Warm left %d decoders, want the first one", n)
	}
	// Two jobs at once get the warmed decoder and a second one.
	var held []*decoder
	for range 2 {
		d, err := a.pool.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, d)
	}
	for _, d := range held {
		a.pool.put(d)
	}
	if n := len(a.pool.idle); n != 2 {
		t.Errorf("%d decoders after two jobs at once, want 2", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(a.pool.idle); n != 0 {
		t.Errorf("Close left %d decoders", n)
	}
	if _, err := run(context.Background(), a, "hello", engine.Chunk{Audio: synth(t, "Hello.", "slt").audio}); !errors.Is(err, errClosed) {
		t.Errorf("Process after Close: %v, want errClosed", err)
	}
}

func TestRegister(t *testing.T) {
	var r engine.Registry
	Register(&r)
	d, ok := r.Lookup(Name)
	if !ok {
		t.Fatalf("%s is not registered", Name)
	}
	if err := d.Check(spec(nil)); err != nil {
		t.Errorf("Check: %v", err)
	}
	tests := []struct {
		name string
		spec engine.Spec
		want string
	}{
		{"input", engine.Spec{Input: engine.KindText, Output: engine.KindTimestamps}, `input must be "audio", not "text"`},
		{"output", engine.Spec{Input: engine.KindAudio, Output: engine.KindAudio}, `output must be "timestamps", not "audio"`},
		{"unknown option", spec(engine.Options{"beam": 1}), `unknown field "beam"`},
		{"decoders", spec(engine.Options{"decoders": 65}), "decoders: 65 is outside [1, 64]"},
		{"negative decoders", spec(engine.Options{"decoders": -1}), "decoders: -1 is outside"},
		{"voice", spec(engine.Options{"voice": "hal"}), `voice: unknown voice "hal"`},
		{"fallback", spec(engine.Options{"fallback": "guess"}), `fallback: "guess" is neither`},
		{"model", spec(engine.Options{"model": "/nonexistent"}), "model: stat /nonexistent/mdef"},
		{"dict", spec(engine.Options{"dict": "/nonexistent.dict"}), "dict: stat /nonexistent.dict"},
		{"dict is a directory", spec(engine.Options{"dict": "/tmp"}), "dict: /tmp is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Check(tt.spec)
			if err == nil || !strings.HasPrefix(err.Error(), Name+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want an error containing %q", err, tt.want)
			}
			if _, err := d.New(tt.spec); err == nil {
				t.Errorf("New accepted the spec")
			}
		})
	}
	e, err := d.New(spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCheckParams(t *testing.T) {
	a := sharedAligner(t)
	for _, p := range []string{"", "null", "{}"} {
		if err := a.CheckParams(json.RawMessage(p)); err != nil {
			t.Errorf("CheckParams(%q): %v", p, err)
		}
	}
	var pe *engine.ParamError
	if err := a.CheckParams(json.RawMessage(`{"speed": 2}`)); !errors.As(err, &pe) {
		t.Errorf("CheckParams with a field: %v, want an *engine.ParamError", err)
	}
}

// TestBoundedMemory runs many alignments and checks that the memory C
// holds (sphinx's grammars, utterances and dictionary) stops growing.
func TestBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("many alignments")
	}
	a, err := New(spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	texts := []string{sentences[0], sentences[1], "Hello, world."}
	var inputs []speech
	for _, text := range texts {
		inputs = append(inputs, synth(t, text, "slt"))
	}
	align := func(n int) {
		for i := range n {
			k := i % len(texts)
			if _, err := run(context.Background(), a, texts[k], engine.Chunk{Audio: inputs[k].audio}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Sphinx's buffers grow now and then to a new high-water mark (by
	// tens of kB, mostly over the first hundred alignments); a leak grows
	// the heap in every window instead.
	const windows, n = 3, 30
	align(n)
	var grew []int
	for range windows {
		before := cHeapBytes()
		align(n)
		grew = append(grew, cHeapBytes()-before)
	}
	t.Logf("C heap %d kB; growth in %d windows of %d alignments: %v bytes", cHeapBytes()/1024, windows, n, grew)
	// Leaking one grammar (a few kB) per alignment would exceed this in
	// every window.
	if slices.Min(grew) > 16*1024 {
		t.Errorf("C heap grew in every window of %d alignments: %v bytes", n, grew)
	}
}

// BenchmarkAlign aligns about 10 s of speech and reports the real-time
// factor: seconds of computing per second of audio.
func BenchmarkAlign(b *testing.B) {
	a := sharedAligner(b)
	text := sentences[2]
	s := synth(b, text, "slt")
	seconds := float64(len(s.audio.Samples)) / float64(s.audio.SampleRate)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := run(context.Background(), a, text, engine.Chunk{Audio: s.audio}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/seconds, "rtf")
	b.ReportMetric(seconds, "audio-s")
}

// TestDefaultDecoders: without the option, a replica aligns as many
// requests at once as half the CPUs the process may use, at least one.
func TestDefaultDecoders(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 1, 16: 8, 200: MaxDecoders} {
		runtime.GOMAXPROCS(procs)
		a, err := New(spec(nil))
		if err != nil {
			t.Fatal(err)
		}
		if a.opts.Decoders != want || cap(a.pool.slots) != want {
			t.Errorf("GOMAXPROCS %d: decoders %d (pool of %d), want %d", procs, a.opts.Decoders, cap(a.pool.slots), want)
		}
		a.Close()
	}
}
