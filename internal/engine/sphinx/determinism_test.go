package sphinx

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// TestAlignDeterministic aligns a few texts in an interleaved order, each
// time on the next of three decoders (two warmed by Warm, one fresh, as
// the pool makes when it replaces a decoder), and requires the same word
// times for the same audio and text every time, whatever was aligned
// before on that decoder. One of the texts adds words to the dictionary.
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
	// lands on every decoder.
	order := []int{0, 1, 0, 2, 0, 3, 1, 4, 2, 0, 4, 3, 1, 2, 4, 0}
	want := make([][]engine.Word, len(texts))
	wantAt := make([]string, len(texts))
	for step, k := range order {
		d := decoders[step%len(decoders)]
		in := inputs[k]
		got, err := a.alignOn(d, in.words, in.pcm, in.durMs)
		d.reset()
		if err != nil {
			t.Fatal(err)
		}
		at := fmt.Sprintf("step %d on decoder %d", step, step%len(decoders))
		if want[k] == nil {
			want[k], wantAt[k] = got, at
			continue
		}
		if !reflect.DeepEqual(got, want[k]) {
			t.Errorf("%q at %s differs from %s:\n got %v\nwant %v", texts[k], at, wantAt[k], got, want[k])
		}
	}
}
