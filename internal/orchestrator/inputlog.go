package orchestrator

// The input a migratable stage keeps so that another replica can take
// the job up from the start of a unit (migrate.go): the chunks its job
// took, from the start of the first unit whose output is not delivered
// whole, bounded.

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
)

// maxReplayBytes bounds the input a stage keeps when its input carries no
// Spans (a talker's text, which is kept whole): past it the stage drops
// what it kept and can no longer move. A talker's text is far below it
// (flite takes 10000 characters); an input cut into units is bounded by
// units instead (engine.MaxReplayAhead).
const maxReplayBytes = 1 << 20

// inputLog is a migratable stage's input (the Source its job reads): it
// takes chunks from the stage's own input and keeps them, so that rewind
// makes it yield them again from the first kept one.
//
// Input whose first chunk carries a Span is cut into units, and the log
// keeps it from the unit of the last output Span delivered (trim): the
// job may take at most engine.MaxReplayAhead units beyond it, since a
// Recv that would begin one more waits until the output catches up.
// Input without Spans is kept whole, up to maxReplayBytes.
type inputLog struct {
	up engine.Source // the stage's own input

	mu      sync.Mutex
	chunks  []engine.Chunk // kept: chunks[i] is the input's chunk first+i
	first   int            // the input's index of chunks[0]
	taken   int            // chunks taken from up
	pos     int            // the input's index of the chunk Recv yields next
	end     error          // up's io.EOF, once it came
	spanned bool           // the input's first chunk carries a Span
	units   int            // chunks kept that carry a Span
	bytes   int            // about what the chunks kept hold, when not spanned
	dropped bool           // past maxReplayBytes: nothing is kept
	closed  bool           // the stage is done: Recv passes up's chunks on
	held    engine.Chunk   // taken from up, not yet yielded: its unit is past the bound
	holds   bool           // held is set
	// room, made when a reader waits for it, is closed when trim drops
	// chunks.
	room chan struct{}
}

func newInputLog(up engine.Source) *inputLog { return &inputLog{up: up} }

// Recv implements engine.Source: the kept chunks not yet yielded since
// the last rewind, then up's, kept as they are yielded. A chunk of up
// that begins a unit past the bound waits, taken but not yielded, until
// trim makes room.
func (l *inputLog) Recv(ctx context.Context) (engine.Chunk, error) {
	l.mu.Lock()
	for {
		switch {
		case l.pos < l.taken:
			c := l.chunks[l.pos-l.first]
			l.pos++
			l.mu.Unlock()
			return c, nil
		case l.holds && (l.held.Span == nil || !l.spanned || l.units <= engine.MaxReplayAhead || l.closed || l.dropped):
			c := l.held
			l.held, l.holds = engine.Chunk{}, false
			l.keep(c)
			l.mu.Unlock()
			return c, nil
		case l.holds:
			if l.room == nil {
				l.room = make(chan struct{})
			}
			room := l.room
			l.mu.Unlock()
			select {
			case <-room:
			case <-ctx.Done():
				return engine.Chunk{}, ctx.Err()
			}
			l.mu.Lock()
			continue
		case l.end != nil:
			l.mu.Unlock()
			return engine.Chunk{}, l.end
		}
		l.mu.Unlock()
		c, err := l.up.Recv(ctx)
		l.mu.Lock()
		if err != nil {
			if errors.Is(err, io.EOF) {
				l.end = err
			}
			l.mu.Unlock()
			return c, err
		}
		l.held, l.holds = c, true
	}
}

// keep counts c, just taken from up, and keeps it unless the log keeps
// nothing.
func (l *inputLog) keep(c engine.Chunk) {
	if l.taken == 0 {
		l.spanned = c.Span != nil
	}
	l.taken++
	l.pos++
	if l.closed || l.dropped {
		l.first = l.taken
		return
	}
	l.chunks = append(l.chunks, c)
	if c.Span != nil {
		l.units++
	}
	if l.spanned {
		return
	}
	l.bytes += chunkBytes(c)
	if l.bytes > maxReplayBytes {
		l.dropped = true
		clear(l.chunks)
		l.chunks, l.first, l.units, l.bytes = nil, l.taken, 0, 0
	}
}

// trim drops the kept input before the unit of sentence, whose first
// output chunk is being delivered, and reports whether it dropped any:
// the log then starts with that unit.
func (l *inputLog) trim(sentence int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.spanned || l.dropped || l.closed {
		return false
	}
	i := -1
	for k := range l.pos - l.first {
		if s := l.chunks[k].Span; s != nil && s.Sentence == sentence {
			i = k
			break
		}
	}
	if i <= 0 {
		return false
	}
	for _, c := range l.chunks[:i] {
		if c.Span != nil {
			l.units--
		}
	}
	clear(l.chunks[:i])
	l.chunks = l.chunks[i:]
	l.first += i
	l.wake()
	return true
}

// retained reports whether the log holds the input from where a new run
// of the job must start.
func (l *inputLog) retained() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.dropped
}

// rewind makes Recv yield the kept chunks again, from the first.
func (l *inputLog) rewind() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pos = l.first
}

// close ends the keeping: the stage is done, and whoever reads the rest of
// its input (to drain it) gets it, never held back.
func (l *inputLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if !l.dropped {
		// What a rewound run left unread is still to be drained.
		read := l.pos - l.first
		clear(l.chunks[:read])
		l.chunks = l.chunks[read:]
		l.first = l.pos
	}
	l.wake()
}

// wake lets a reader waiting for room go on; l.mu is held.
func (l *inputLog) wake() {
	if l.room != nil {
		close(l.room)
		l.room = nil
	}
}

// chunkBytes is about what c holds, for the bound on input kept whole.
func chunkBytes(c engine.Chunk) int {
	n := 64
	switch {
	case c.Text != nil:
		n += len(c.Text.Text)
	case c.Frames != nil:
		n += 4 * (len(c.Frames.Params) + len(c.Frames.Str))
	case c.Segments != nil:
		n += 16 * len(c.Segments.Names)
	case c.Audio != nil:
		n += 2 * len(c.Audio.Samples)
	case c.Words != nil:
		n += 64 * len(c.Words.Words)
	case c.Image != nil:
		n += len(c.Image.Bytes)
	case c.Data != nil:
		n += len(c.Data.Bytes)
	case c.Tensors != nil:
		for _, t := range c.Tensors.Tensors {
			n += len(t.Data)
		}
	case c.Regions != nil:
		for _, r := range c.Regions.Regions {
			n += 64 + len(r.Text) + 4*len(r.Confidence)
			if r.Crop != nil {
				n += len(r.Crop.Pixels)
			}
		}
	}
	return n
}
