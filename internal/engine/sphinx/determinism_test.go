package sphinx

import (
	"context"
	"fmt"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestAlignDeterministic aligns a few texts in an interleaved order, each
// time on the next of three decoders (the one Warm warmed, one the pool
// made for a second job at once, one fresh, as the pool makes when it
// replaces a decoder), whole or fed block by
// block, and requires the same word times for the same audio and text
// every time, whatever was aligned before on that decoder, either way.
// One of the texts adds words to the dictionary.
func TestAlignDeterministic(t *testing.T) {
	a, err := New(spec(engine.Options{"decoders": 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if err := a.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	var decoders []*decoder
	for range 2 {
		d, err := a.pool.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer a.pool.put(d)
		decoders = append(decoders, d)
	}
	fresh, err := newDecoder(DefaultModel, DefaultDict)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.free()
	decoders = append(decoders, fresh)

	type input struct {
		words []word
		pcm   []int16
		durMs int
	}
	texts := []string{
		"He put on his helmet and picked up the hammer.",
		"In 1997, the company's revenue grew quickly.",
		"We also need a small plastic snake and a big toy frog.",
		"The zorblaxian quenched a flimbergast near Omnistage.",
		"The quick brown fox jumps over the lazy dog.",
	}
	inputs := make([]input, len(texts))
	for i, text := range texts {
		s := synth(t, text, "slt")
		ws, err := transcript(text, "slt")
		if err != nil {
			t.Fatal(err)
		}
		pcm, durMs, err := readAudio(ctx, engine.NewSliceSource(engine.Chunk{Audio: s.audio}))
		if err != nil {
			t.Fatal(err)
		}
		inputs[i] = input{ws, pcm, durMs}
	}

	// A, B, A, C, A, D, ...: every text follows several others, and
	// lands on every decoder, decoded whole on even steps and fed block
	// by block on odd ones.
	order := []int{0, 1, 0, 2, 0, 3, 1, 4, 2, 0, 4, 3, 1, 2, 4, 0, 3, 3, 1, 1}
	want := make([]string, 2*len(texts))
	wantAt := make([]string, 2*len(texts))
	for step, k := range order {
		d := decoders[step%len(decoders)]
		in := inputs[k]
		got, err := alignEither(a, d, in.words, in.pcm, in.durMs, step%2 == 1)
		d.reset()
		if err != nil {
			t.Fatal(err)
		}
		k = 2*k + step%2
		at := fmt.Sprintf("step %d on decoder %d", step, step%len(decoders))
		if want[k] == "" {
			want[k], wantAt[k] = got, at
			continue
		}
		if got != want[k] {
			t.Errorf("%q at %s differs from %s:\n got %v\nwant %v", texts[k/2], at, wantAt[k], got, want[k])
		}
	}
}

// alignEither aligns words on d, whole or fed block by block as the head
// of a request (all of the audio, here), and formats the result.
func alignEither(a *Aligner, d *decoder, words []word, pcm []int16, durMs int, fed bool) (string, error) {
	if !fed {
		got, err := a.alignOn(d, words, pcm, durMs)
		return fmt.Sprint(got), err
	}
	s, err := newSentence(d, words, 0)
	if err != nil {
		return "", err
	}
	for s.fed+streamBlock <= len(pcm) {
		if err := s.feed(pcm[s.fed : s.fed+streamBlock]); err != nil {
			return "", err
		}
	}
	return fmt.Sprint(s.fixed), nil
}

// TestHeadRepeats decodes the first second of the same sentence block by
// block many times on one decoder, each time after a whole decode, and
// requires the same settled words every time. (The feature buffer the
// blocks go through used to keep its place from one utterance to the
// next, and the words came out differently whenever an utterance began
// near its end: here, first at the 14th time.)
func TestHeadRepeats(t *testing.T) {
	a := sharedAligner(t)
	d, err := a.pool.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer a.pool.put(d)
	s := synth(t, sentences[0], "slt")
	words, err := transcript(sentences[0], "slt")
	if err != nil {
		t.Fatal(err)
	}
	pcm := s.audio.Samples
	var want string
	for i := range 60 {
		if _, err := a.alignOn(d, words, pcm, durationMs(s.audio)); err != nil {
			t.Fatal(err)
		}
		d.reset()
		h, err := newSentence(d, words, 0)
		if err != nil {
			t.Fatal(err)
		}
		for h.fedMs() < 1000 {
			if err := h.feed(pcm[h.fed : h.fed+streamBlock]); err != nil {
				t.Fatal(err)
			}
		}
		d.reset()
		got := fmt.Sprint(h.fixed)
		if i == 0 {
			want = got
		} else if got != want {
			t.Fatalf("repetition %d: settled %s, want %s", i, got, want)
		}
	}
}
