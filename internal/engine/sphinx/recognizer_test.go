package sphinx

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/engine"
)

var sharedRec struct {
	once sync.Once
	r    *Recognizer
	err  error
}

// sharedRecognizer returns one recognizer for the tests that do not need
// their own; TestMain closes it.
func sharedRecognizer(t testing.TB) *Recognizer {
	t.Helper()
	sharedRec.once.Do(func() { sharedRec.r, sharedRec.err = NewRecognizer("", "", "") })
	if sharedRec.err != nil {
		t.Fatal(sharedRec.err)
	}
	return sharedRec.r
}

func TestRecognize(t *testing.T) {
	r := sharedRecognizer(t)
	s := synth(t, sentences[0], "slt")
	got, err := r.Recognize(context.Background(), s.audio)
	if err != nil {
		t.Fatal(err)
	}
	if want := "the quick brown fox jumps over the lazy dog"; got != want {
		t.Errorf("Recognize = %q, want %q", got, want)
	}

	// The same speech at 24 kHz is resampled to the model's 16 kHz.
	rs, err := audio.NewResampler(16000, 24000)
	if err != nil {
		t.Fatal(err)
	}
	hi := &engine.Audio{SampleRate: 24000, Samples: rs.AppendFlush(rs.Process(s.audio.Samples))}
	if got24, err := r.Recognize(context.Background(), hi); err != nil || got24 != got {
		t.Errorf("Recognize at 24 kHz = %q, %v; want %q", got24, err, got)
	}

	// Silence is heard as nothing.
	if got, err := r.Recognize(context.Background(), &engine.Audio{SampleRate: 16000, Samples: make([]int16, 16000)}); err != nil || got != "" {
		t.Errorf("Recognize(silence) = %q, %v; want nothing", got, err)
	}
}

// TestRecognizeIgnoresHistory checks that what a recognizer hears does
// not depend on what it heard before. (With sphinx's default noise
// removal, whose estimate carries over from one utterance to the next,
// the same audio was heard differently after different audio.)
func TestRecognizeIgnoresHistory(t *testing.T) {
	r := sharedRecognizer(t)
	const text = `"We met at the cafe," said the naive reporter - she'd never been to Zurich before. ` +
		"Her notes read and nothing else... it was a long day."
	target := synth(t, text, "kal16").audio
	voices := []string{"slt", "awb", "kal16", "rms"}
	rounds := 8
	if testing.Short() {
		rounds = 4
	}
	var first string
	for i := range rounds {
		got, err := r.Recognize(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Errorf("after %d other utterances, heard %q; first heard %q", i, got, first)
		}
		// Speech of other voices and lengths in between.
		other := synth(t, sentences[i%len(sentences)], voices[i%len(voices)]).audio
		n := len(other.Samples)
		if i%3 == 0 {
			n /= 3
		}
		if _, err := r.Recognize(context.Background(), &engine.Audio{SampleRate: other.SampleRate, Samples: other.Samples[:n]}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecognizeBadInput(t *testing.T) {
	r := sharedRecognizer(t)
	for name, a := range map[string]*engine.Audio{
		"nil":      nil,
		"empty":    {SampleRate: 16000},
		"500 Hz":   {SampleRate: 500, Samples: make([]int16, 800)},
		"too long": {SampleRate: 16000, Samples: make([]int16, 16000*MaxAudioSeconds+1)},
	} {
		_, err := r.Recognize(context.Background(), a)
		var in *engine.InputError
		if !errors.As(err, &in) {
			t.Errorf("%s: err = %v, want an *engine.InputError", name, err)
		}
	}
}

func TestRecognizerCancelAndClose(t *testing.T) {
	r, err := NewRecognizer("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	s := synth(t, sentences[0], "slt")

	// While another call holds the decoder, a cancelled call gives up.
	d := <-r.idle
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Recognize(ctx, s.audio); !errors.Is(err, context.Canceled) {
		t.Errorf("Recognize with a cancelled context = %v, want context.Canceled", err)
	}
	r.idle <- d

	r.Close()
	if _, err := r.Recognize(context.Background(), s.audio); !errors.Is(err, errRecognizerClosed) {
		t.Errorf("Recognize after Close = %v, want errRecognizerClosed", err)
	}
}

func TestNewRecognizerBadModel(t *testing.T) {
	if _, err := NewRecognizer("", t.TempDir()+"/missing.lm.bin", ""); err == nil {
		t.Error("NewRecognizer with a missing language model succeeded")
	}
}

// TestRecognizerConcurrent runs two recognizers at once; each call gets
// the answer it gets alone.
func TestRecognizerConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a second language model")
	}
	rs := []*Recognizer{sharedRecognizer(t)}
	r2, err := NewRecognizer("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	rs = append(rs, r2)
	want := make([]string, len(sentences))
	for i, text := range sentences {
		if want[i], err = rs[0].Recognize(context.Background(), synth(t, text, "slt").audio); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	got := make([][]string, len(rs))
	for k, r := range rs {
		got[k] = make([]string, len(sentences))
		wg.Go(func() {
			for i, text := range sentences {
				got[k][i], _ = r.Recognize(context.Background(), synth(t, text, "slt").audio)
			}
		})
	}
	wg.Wait()
	for k := range rs {
		if !slices.Equal(got[k], want) {
			t.Errorf("recognizer %d heard %q, want %q", k, got[k], want)
		}
	}
}

// TestRecognizerNoLeak checks that recognizing frees what it allocates.
func TestRecognizerNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	r := sharedRecognizer(t)
	a := synth(t, sentences[0], "slt").audio
	recognize := func(n int) {
		for range n {
			if _, err := r.Recognize(context.Background(), a); err != nil {
				t.Fatal(err)
			}
		}
	}
	recognize(5)
	const windows, n = 3, 10
	var grew []int
	for range windows {
		before := cHeapBytes()
		recognize(n)
		grew = append(grew, cHeapBytes()-before)
	}
	t.Logf("growth in %d windows of %d decodes: %v bytes", windows, n, grew)
	// Leaking the hypothesis or the audio's features in every decode would
	// exceed this in every window.
	if slices.Min(grew) > 16*1024 {
		t.Errorf("C heap grew in every window of %d decodes: %v bytes", n, grew)
	}

	// Loading and freeing recognizers returns their memory.
	before := cHeapBytes()
	for range 3 {
		r, err := NewRecognizer("", "", "")
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if d := cHeapBytes() - before; d > 1<<20 {
		t.Errorf("C heap grew by %d bytes over 3 recognizers made and closed", d)
	}
}
