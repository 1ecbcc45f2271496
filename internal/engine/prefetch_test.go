package engine

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestPrefetch: the producer sends every chunk while nothing takes them,
// and they come out in order, then the end.
func TestPrefetch(t *testing.T) {
	defer goleak.VerifyNone(t)
	ch := make(chan Chunk) // unbuffered: a send waits for the reader
	src, stop := Prefetch(context.Background(), ChanSource(ch))
	defer stop()
	for i := range 100 {
		ch <- Chunk{Text: &Text{Text: string(rune('a' + i%26))}}
	}
	close(ch)
	for i := range 100 {
		c, err := src.Recv(context.Background())
		if err != nil || c.Text.Text != string(rune('a'+i%26)) {
			t.Fatalf("chunk %d: %v, %v", i, c, err)
		}
	}
	for range 2 {
		if _, err := src.Recv(context.Background()); !errors.Is(err, io.EOF) {
			t.Fatalf("after the chunks: %v, want io.EOF", err)
		}
	}
}

// TestPrefetchErrors: a read error comes after the chunks read before it;
// a taker's own context ends its wait; stop ends the reading.
func TestPrefetchErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	src, stop := Prefetch(context.Background(), &failingSource{chunks: 2, err: boom})
	for i := range 2 {
		if _, err := src.Recv(context.Background()); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if _, err := src.Recv(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("after the chunks: %v, want boom", err)
	}
	stop()

	ch := make(chan Chunk)
	src, stop = Prefetch(context.Background(), ChanSource(ch))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := src.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("nothing sent: %v, want the taker's deadline", err)
	}
	stop() // returns although nothing closes ch
	if _, err := src.Recv(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("after stop: %v, want context.Canceled", err)
	}
}

// failingSource yields its number of empty chunks, then err.
type failingSource struct {
	chunks int
	err    error
}

func (s *failingSource) Recv(ctx context.Context) (Chunk, error) {
	if s.chunks == 0 {
		return Chunk{}, s.err
	}
	s.chunks--
	return Chunk{}, nil
}
