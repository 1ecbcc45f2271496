package engine

// Feed, the text of a streamed request as it arrives.

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
)

// Feed is the text of a streamed request (one whose input arrives while it
// runs) as it arrives: the runtime appends each piece as the entry stage's
// input comes in, before the entry stage receives it, and closes the feed
// at the input's end; any stage may read it (the aligner's transcript is
// the text so far). Since a stage's output can only follow from input the
// entry stage has received, the text a stage's input depends on is in the
// feed by the time that input reaches the stage. It is safe for
// concurrent use.
type Feed struct {
	mu sync.Mutex
	// text only grows: the strings it has returned stay valid, and a
	// long text fed in many small pieces is copied O(log n) times, not n.
	text strings.Builder
	done bool
	grew chan struct{} // closed, and replaced, at each change
}

// NewFeed returns an empty feed that is not done.
func NewFeed() *Feed { return &Feed{grew: make(chan struct{})} }

// Append adds s to the text, unless the feed is done.
func (f *Feed) Append(s string) {
	if s == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	f.text.WriteString(s)
	f.changed()
}

// Close marks the text complete; later Appends are ignored.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.done = true
		f.changed()
	}
}

// changed wakes the waiters; f.mu is held.
func (f *Feed) changed() {
	close(f.grew)
	f.grew = make(chan struct{})
}

// Text returns the text so far and whether it is complete.
func (f *Feed) Text() (text string, done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.text.String(), f.done
}

// Wait returns the text once it is longer than n bytes or complete, or
// ctx's error if ctx ends first.
func (f *Feed) Wait(ctx context.Context, n int) (text string, done bool, err error) {
	for {
		f.mu.Lock()
		text, done, grew := f.text.String(), f.done, f.grew
		f.mu.Unlock()
		if len(text) > n || done {
			return text, done, nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return text, false, ctx.Err()
		}
	}
}

// Feeding returns src, appending the text of each chunk it yields to f
// before yielding it, and closing f when src ends (io.EOF) or fails.
func Feeding(src Source, f *Feed) Source { return &feeding{src: src, feed: f} }

type feeding struct {
	src  Source
	feed *Feed
}

func (s *feeding) Recv(ctx context.Context) (Chunk, error) {
	c, err := s.src.Recv(ctx)
	switch {
	case err == nil:
		if c.Text != nil {
			s.feed.Append(c.Text.Text)
		}
	case errors.Is(err, io.EOF) || ctx.Err() == nil:
		// The input's end, or its failure: either way no more text comes.
		s.feed.Close()
	}
	return c, err
}

// DefaultSentenceQuiet is how long a live session's client may fall quiet
// after a full stop before the session tells the talker the sentence has
// ended (Text.Break): longer than the gaps between a streaming LLM's
// tokens (10 to 50 ms at 20 to 100 tokens a second, rarely past 250 ms),
// so that a full stop followed by more of the same text is seldom cut by
// time, and shorter than a pause a listener hears as the voice stalling.
const DefaultSentenceQuiet = 400 * time.Millisecond

// EndsInStop reports whether a piece of streamed text ends in a full stop,
// closing quotes and brackets and white space aside; known is false for a
// piece of nothing but those, which leaves the text's ending as it was.
func EndsInStop(piece string) (stop, known bool) {
	t := strings.TrimRight(piece, " \t\r\n\"')]}")
	if t == "" {
		return false, false
	}
	return strings.HasSuffix(t, "."), true
}
