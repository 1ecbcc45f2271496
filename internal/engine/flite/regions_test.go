package flite

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

// noteList is an engine.Noter that keeps the notes.
type noteList []string

func (n *noteList) Note(msg string) { *n = append(*n, msg) }

// TestTalkerRegions: a talker reading an image's regions speaks the text
// they make (each region's text on a line), as it speaks that text sent
// whole, the spans pointing into it, however the regions come in chunks;
// a region it has nothing of to speak is noted, and an image with nothing
// to speak at all is silence, not an error.
func TestTalkerRegions(t *testing.T) {
	talker := newStage(t, TalkerName, engine.KindRegions, engine.KindFrames, engine.Options{"voice": "slt"})
	lines := []string{"Exit", "出口", "Fire door. Keep closed.", "Do not block"}
	var regions []engine.Region
	for i, l := range lines {
		regions = append(regions, engine.Region{Index: i, Text: l})
	}
	chunk := func(rs ...engine.Region) engine.Chunk {
		return engine.Chunk{Regions: &engine.Regions{Width: 100, Height: 100, Regions: rs}}
	}
	var whole engine.RegionsText
	want, err := run(talkerFor(t, "slt"), "", text(whole.Add(regions)))
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range [][]engine.Chunk{
		{chunk(regions...)},
		{chunk(regions[0]), chunk(regions[1:3]...), chunk(regions[3])},
	} {
		var notes noteList
		sink := &engine.SliceSink{}
		ctx := engine.WithNoter(context.Background(), &notes)
		if err := talker.Process(ctx, &engine.Job{In: engine.NewSliceSource(split...), Out: sink}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sink.Chunks, want) {
			t.Errorf("%d chunks: the talker's chunks differ from those of the whole text", len(split))
		}
		if len(notes) != 1 || !strings.Contains(notes[0], `region 1 ("出口") is not spoken`) {
			t.Errorf("notes %q", notes)
		}
	}
	for _, in := range [][]engine.Chunk{{chunk()}, {chunk(engine.Region{Text: "学习"})}} {
		var notes noteList
		sink := &engine.SliceSink{}
		err := talker.Process(engine.WithNoter(context.Background(), &notes), &engine.Job{In: engine.NewSliceSource(in...), Out: sink})
		if err != nil || len(sink.Chunks) != 0 {
			t.Errorf("%d regions with nothing to speak: %v, %d chunks", len(in[0].Regions.Regions), err, len(sink.Chunks))
		}
	}
}
