package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// spanned returns n units of input of two chunks each, the first of each
// carrying its Span.
func spanned(n int) []engine.Chunk {
	var cs []engine.Chunk
	for u := range n {
		cs = append(cs,
			engine.Chunk{Text: &engine.Text{Text: fmt.Sprintf("u%d.0", u)}, Span: &engine.Span{Sentence: u}},
			engine.Chunk{Text: &engine.Text{Text: fmt.Sprintf("u%d.1", u)}})
	}
	return cs
}

// recvQuick reads one chunk from l, giving up soon: a log that holds its
// reader back returns context.DeadlineExceeded.
func recvQuick(l *inputLog) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	c, err := l.Recv(ctx)
	if err != nil {
		return "", err
	}
	return c.Text.Text, nil
}

// TestInputLogUnits: input cut into units is kept from the unit whose
// output is being delivered, and a reader may take at most
// engine.MaxReplayAhead units beyond it; rewind yields the kept input
// again, and close lets the rest through.
func TestInputLogUnits(t *testing.T) {
	l := newInputLog(engine.NewSliceSource(spanned(8)...))
	var got []string
	for {
		s, err := recvQuick(l)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	// Units 0..MaxReplayAhead are taken whole; the next unit's first
	// chunk waits.
	if want := 2 * (engine.MaxReplayAhead + 1); len(got) != want {
		t.Fatalf("took %d chunks (%v) before it was held back, want %d", len(got), got, want)
	}
	if l.trim(0) {
		t.Error("trim to the first unit dropped input")
	}
	if !l.trim(2) {
		t.Fatal("trim to unit 2 dropped nothing")
	}
	if s, err := recvQuick(l); err != nil || s != fmt.Sprintf("u%d.0", engine.MaxReplayAhead+1) {
		t.Fatalf("after the trim: %q, %v", s, err)
	}
	l.rewind()
	if s, err := recvQuick(l); err != nil || s != "u2.0" {
		t.Fatalf("after rewind: %q, %v; want the kept input from unit 2", s, err)
	}
	l.close()
	var rest []string
	for {
		s, err := recvQuick(l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after close: %v", err)
		}
		rest = append(rest, s)
	}
	if want := 2*8 - 5; len(rest) != want || rest[0] != "u2.1" {
		t.Errorf("after close read %v, want the %d chunks after u2.0", rest, want)
	}
}

// TestInputLogWhole: input without units is kept whole, for a replay from
// its start, until it passes maxReplayBytes; then nothing is kept.
func TestInputLogWhole(t *testing.T) {
	piece := strings.Repeat("x", maxReplayBytes/4)
	var cs []engine.Chunk
	for range 5 {
		cs = append(cs, engine.Chunk{Text: &engine.Text{Text: piece}})
	}
	l := newInputLog(engine.NewSliceSource(cs...))
	for range 3 {
		if _, err := recvQuick(l); err != nil {
			t.Fatal(err)
		}
	}
	if l.trim(0) || !l.retained() {
		t.Fatal("input without units was trimmed or not kept")
	}
	l.rewind()
	for i := range 4 {
		if _, err := recvQuick(l); err != nil {
			t.Fatalf("chunk %d after rewind: %v", i, err)
		}
	}
	if l.retained() {
		t.Errorf("%d bytes kept, past the bound of %d", 4*len(piece), maxReplayBytes)
	}
	if _, err := recvQuick(l); err != nil {
		t.Fatalf("the last chunk, nothing kept: %v", err)
	}
	if _, err := recvQuick(l); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
}
