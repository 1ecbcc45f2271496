package api

// One utterance of a speech stream session: its text as it arrives (the
// request's input), its state, and what of it was sent, from which
// audio.cancelled says what the client heard.

import (
	"context"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/omnistage/omnistage/internal/engine"
)

// utterance is the text between one session's input.done events (or the
// session's start) and the request that speaks it. Its fields are the
// session loop's, except the counts under wsOut's lock (sent) and what
// its relay alone touches.
type utterance struct {
	index int
	cfg   *wsConfig
	text  *textQueue

	ctx    context.Context // the request's: cancelled by input.cancel and the session's end
	cancel context.CancelFunc

	started   bool  // its relay was started
	inputDone bool  // input.done came: the text is complete
	ended     bool  // its relay returned
	err       error // why the relay failed (an error event said so), or nil

	sent sentAudio // under wsOut.mu
}

// sentAudio is what of an utterance went out to the client, counted under
// wsOut's lock so that audio.cancelled reads it as it stands when the
// last audio message before it was sent.
type sentAudio struct {
	cancelled bool // audio.cancelled was sent: nothing of it goes out after
	requestID string
	rate      int
	bytes     int64         // audio bytes sent (binary messages)
	samples   int64         // samples those bytes surely cover (see wsOut.audio)
	sentences int           // sentences whose audio.start was sent
	current   int           // the sentence whose audio is going out, or the last; -1 before the first
	heardEnd  int           // code point end of the last sentence whose audio is all sent
	words     []engine.Word // on the samples' timeline
	spans     []engine.Span // of the sentences begun, in order
	// leadMs is how much later than the samples a player plays them from
	// the bytes (mp3 and aac): the words the client is told are moved so.
	leadMs int
}

func newUtterance(parent context.Context, index int, cfg *wsConfig) *utterance {
	u := &utterance{index: index, cfg: cfg, text: newTextQueue()}
	u.text.clauses = cfg != nil && cfg.split == splitClause
	u.ctx, u.cancel = context.WithCancel(parent)
	u.sent.current = -1
	return u
}

// heard returns audio.cancelled for u as sent stands: how many bytes of
// its audio went out, and the text that audio fully covered. The bound is
// a lower one: the text up to the end of the last sentence whose audio is
// all sent, and further the words whose timestamps (those sent so far)
// end within the samples sent. A sentence's samples count as sent when
// the bytes that hold them were (for pcm and wav, as they go; for the
// encoded formats, and without stream_audio, once the sentence's audio is
// all sent). Without word timestamps, the bound is by sentence.
func (u *utterance) heard() wsCancelled {
	s := &u.sent
	ev := wsCancelled{Type: evCancelled, UtteranceIndex: u.index, SentenceIndex: s.current,
		TotalBytes: s.bytes, RequestID: s.requestID, Words: []engine.Word{}}
	if s.rate > 0 {
		ev.AudioMs = int(s.samples * 1000 / int64(s.rate))
	}
	end := s.heardEnd
	for _, w := range s.words {
		if w.EndMs > ev.AudioMs {
			continue
		}
		w.StartMs += s.leadMs
		w.EndMs += s.leadMs
		ev.Words = append(ev.Words, w)
		end = max(end, w.CharEnd)
	}
	ev.HeardCharEnd = end
	ev.HeardText = u.text.slice(0, end)
	return ev
}

// textQueue is an utterance's text: the part the talker has not taken
// yet, and, in the request's feed (engine.Feed), the part it has. It is
// the request's input (engine.Source): Recv takes whatever waits, in one
// chunk, and the runtime appends it to the feed.
type textQueue struct {
	feed    *engine.Feed
	clauses bool // split_granularity clause: each clause ends a sentence (cuts)
	mu      sync.Mutex
	pending string
	// cuts are the byte offsets in pending after which the text so far
	// ends a clause (clauses): Recv gives the talker the text up to each
	// in turn, with Break.
	cuts []int
	// mark is whether the text so far ends in a clause's mark that white
	// space must follow to end it (clauses).
	mark  bool
	taken int           // bytes Recv has given the talker
	done  bool          // no more text comes
	brk   bool          // the text so far ends a sentence: Recv says so (engine.Text.Break)
	ready chan struct{} // signalled when pending grows or done is set
	// stop is whether the text so far ends in a full stop (closing quotes
	// and brackets aside), which only the next word, or a quiet time,
	// settles as a sentence's end.
	stop bool
	// cursor speeds up slice for spans that only move forward: the code
	// point and byte offsets of a place in all.
	cpAt, byteAt int
}

func newTextQueue() *textQueue {
	return &textQueue{feed: engine.NewFeed(), ready: make(chan struct{}, 1)}
}

var _ engine.Source = (*textQueue)(nil)

// add appends s.
func (q *textQueue) add(s string) {
	q.mu.Lock()
	if q.clauses {
		q.cutClauses(s)
	}
	q.pending += s
	if stop, known := engine.EndsInStop(s); known {
		q.stop = stop
	}
	q.mu.Unlock()
	q.signal()
}

// cutClauses notes the ends of clauses in s, about to be appended to
// pending (q.mu is held): after a comma or semicolon followed by white
// space (not in "1,000"), and at once after the CJK and Arabic forms,
// which have no space after them, as vLLM-Omni's clause splitting.
func (q *textQueue) cutClauses(s string) {
	base := len(q.pending)
	for i, r := range s {
		switch {
		case q.mark && unicode.IsSpace(r):
			q.cuts = append(q.cuts, base+i+utf8.RuneLen(r))
			q.mark = false
		case strings.ContainsRune("，；、،", r):
			q.cuts = append(q.cuts, base+i+utf8.RuneLen(r))
			q.mark = false
		default:
			q.mark = r == ',' || r == ';'
		}
	}
}

// endsInStop reports whether the text so far ends in a full stop.
func (q *textQueue) endsInStop() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stop
}

// brkSentence tells the talker that the text so far ends a sentence.
func (q *textQueue) brkSentence() {
	q.mu.Lock()
	q.brk, q.stop = true, false
	q.mu.Unlock()
	q.signal()
}

// close ends the text.
func (q *textQueue) close() {
	q.mu.Lock()
	q.done = true
	q.mu.Unlock()
	q.signal()
}

// drop forgets the text not taken yet, and ends the text.
func (q *textQueue) drop() {
	q.mu.Lock()
	q.pending, q.done, q.cuts = "", true, nil
	q.mu.Unlock()
	q.signal()
}

func (q *textQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// waiting returns the bytes of text not taken yet.
func (q *textQueue) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// size returns the bytes of the whole text.
func (q *textQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.taken + len(q.pending)
}

// Recv implements engine.Source: the text waiting, or io.EOF once the
// text is done and all taken.
func (q *textQueue) Recv(ctx context.Context) (engine.Chunk, error) {
	for {
		q.mu.Lock()
		text, done, brk := q.pending, q.done, q.brk
		q.pending, q.brk = "", false
		if len(q.cuts) > 0 {
			// Up to the first clause's end, which ends a sentence.
			cut := q.cuts[0]
			text, q.pending, brk, q.brk = text[:cut], text[cut:], true, brk
			q.cuts = q.cuts[1:]
			for i := range q.cuts {
				q.cuts[i] -= cut
			}
		}
		q.taken += len(text)
		q.mu.Unlock()
		switch {
		case text != "" || brk:
			return engine.Chunk{Text: &engine.Text{Text: text, Break: brk}}, nil
		case done:
			return engine.Chunk{}, io.EOF
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return engine.Chunk{}, ctx.Err()
		}
	}
}

// cpLen returns the code points of the text the talker has taken.
func (q *textQueue) cpLen() int {
	all, _ := q.feed.Text()
	return utf8.RuneCountInString(all)
}

// slice returns the code points [start, end) of the text the talker has
// taken, cut to what it holds.
func (q *textQueue) slice(start, end int) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	all, _ := q.feed.Text()
	from := q.byteOf(all, start)
	to := q.byteOf(all, end)
	return all[from:to]
}

// byteOf returns the byte offset of code point n of all, moving the
// cursor there; q.mu is held.
func (q *textQueue) byteOf(all string, n int) int {
	if n < q.cpAt {
		q.cpAt, q.byteAt = 0, 0
	}
	for q.cpAt < n && q.byteAt < len(all) {
		_, size := utf8.DecodeRuneInString(all[q.byteAt:])
		q.byteAt += size
		q.cpAt++
	}
	if q.cpAt < n {
		return len(all)
	}
	return q.byteAt
}
