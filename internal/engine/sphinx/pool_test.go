package sphinx

import (
	"context"
	"reflect"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
)

// TestPoolRecycles checks that the pool frees a broken decoder, or one
// whose dictionary grew too much, and creates a fresh one in its place.
func TestPoolRecycles(t *testing.T) {
	p := newPool(1, DefaultModel, DefaultDict)
	defer p.close()
	ctx := context.Background()
	for _, spoil := range []func(d *decoder){
		func(d *decoder) { d.broken = true },
		func(d *decoder) { d.added = maxAdded + 1 },
	} {
		d, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		spoil(d)
		p.put(d)
		if d.ps != nil {
			t.Error("put kept a spoiled decoder")
		}
		d2, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d2 == d || d2.ps == nil {
			t.Error("get did not create a fresh decoder")
		}
		p.put(d2)
	}
}

// TestDecodesTakeTurns: every decode of a job (the head's blocks, each
// sentence's whole utterance) runs in a turn of the job's request, and
// every turn ends; the timestamps are those of a run without turns.
func TestDecodesTakeTurns(t *testing.T) {
	a := sharedAligner(t)
	text := sentences[0]
	s := synth(t, text, "slt")
	chunk := engine.Chunk{Audio: s.audio}
	plain, err := run(context.Background(), a, text, chunk)
	if err != nil {
		t.Fatal(err)
	}
	turns := &testengine.Turns{}
	got, err := run(turns.Context(context.Background()), a, text, chunk)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, plain) {
		t.Errorf("with turns:\n got %v\nwant %v", got, plain)
	}
	taken, ended, _, most := turns.Counts()
	// At least the head's first block and the sentence's whole decode.
	if taken < 2 || ended != taken || most != 1 {
		t.Errorf("%d turns taken, %d ended, %d held at most at once; want 2 or more, all ended, 1", taken, ended, most)
	}
}
