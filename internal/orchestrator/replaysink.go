package orchestrator

// The output of a migratable stage: what of it was delivered downstream,
// and, on a new replica's run, the splice of its output onto that.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/lebytes"
)

// errDiverged fails a deterministic replay whose output differs from
// what the lost replica delivered.
var errDiverged = errors.New("the replay's output differs from what the lost replica delivered")

// replaySink is a migratable stage's output (its job's Sink). It notes
// what reaches the stage's sink (delivered downstream), moves the stage's
// input log on as units complete, and, on a run that takes the job up on
// another replica, drops what was delivered already: for a deterministic
// engine the first skip chunks, which must be those delivered (their
// hashes are kept); for another, the chunks of the units delivered whole.
// Sends do not overlap, and a run's are over before the next run starts.
type replaySink struct {
	out  *stageSink
	log  *inputLog
	hash bool // keep hashes of what is delivered (a deterministic engine)

	// What was delivered: chunks in all, and since origin (the output
	// chunk that the log's first kept chunk begins), their hashes; the
	// last unit begun since origin (lastUnit, -1 for none) and whether
	// its last chunk delivered completed it.
	delivered, origin int
	hashes            []uint64
	lastUnit          int
	complete          bool

	// The current run: how many of its chunks to drop as delivered
	// (deterministic), or the first unit to deliver (otherwise); its
	// chunks so far, and the unit its last chunk belongs to.
	skip, fromUnit int
	sent, unit     int
	// diverged is set when the run's output differs from what was
	// delivered; cancel ends the run then.
	diverged bool
	cancel   context.CancelCauseFunc
}

// replaySeed seeds the hashes of delivered chunks; any seed works, as
// long as one process compares its own hashes.
var replaySeed = maphash.MakeSeed()

// Send implements engine.Sink.
func (s *replaySink) Send(ctx context.Context, c engine.Chunk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := s.sent
	s.sent++
	if c.Span != nil {
		s.unit = c.Span.Sentence
	}
	switch {
	case n < s.skip:
		if chunkHash(c) != s.hashes[n] {
			s.diverged = true
			s.cancel(errDiverged)
			return errDiverged
		}
		return nil
	case !s.hash && s.unit < s.fromUnit:
		return nil
	}
	if err := s.out.Send(ctx, c); err != nil {
		return err
	}
	s.deliver(c)
	return nil
}

// deliver notes c, delivered downstream.
func (s *replaySink) deliver(c engine.Chunk) {
	if c.Span != nil && c.Span.Sentence != s.lastUnit {
		s.lastUnit = c.Span.Sentence
		// Every unit before this one is delivered whole: the input they
		// came of is no longer needed.
		if s.log.trim(c.Span.Sentence) {
			s.origin = s.delivered
			s.hashes = s.hashes[:0]
		}
	}
	s.delivered++
	s.complete = engine.UnitEnds(c)
	if s.hash {
		s.hashes = append(s.hashes, chunkHash(c))
	}
}

// rewind readies the sink for a new run of the job, given its input from
// the log's first kept chunk on, which begins output chunk origin.
func (s *replaySink) rewind() {
	s.sent, s.unit = 0, -1
	s.skip, s.fromUnit = 0, -1
	if s.hash {
		s.skip = s.delivered - s.origin
		return
	}
	// Units begin again at the first one not delivered whole: the last
	// one begun, unless its end was delivered too.
	s.fromUnit = s.lastUnit
	if s.complete {
		s.fromUnit++
	}
}

// settle checks a run that returned err: a deterministic run that ended
// before it made all that was delivered diverged too.
func (s *replaySink) settle(err error) error {
	if err == nil && s.sent < s.skip {
		s.diverged = true
		return fmt.Errorf("%w: it made %d chunks, %d were delivered", errDiverged, s.sent, s.skip)
	}
	if s.diverged {
		return errDiverged
	}
	return err
}

// chunkHash hashes what c holds, for comparing a replay's chunks with
// those delivered.
func chunkHash(c engine.Chunk) uint64 {
	var h maphash.Hash
	h.SetSeed(replaySeed)
	if s := c.Span; s != nil {
		writeInts(&h, 1, int64(s.Sentence), int64(s.Start), int64(s.End))
		writeString(&h, s.Text)
	}
	switch {
	case c.Audio != nil:
		a := c.Audio
		writeInts(&h, 2, int64(a.SampleRate), boolInt(a.EndOfSentence))
		writeBytes(&h, lebytes.ViewInt16Bytes, lebytes.AppendInt16s, a.Samples)
	case c.Frames != nil:
		f := c.Frames
		writeInts(&h, 3, int64(f.Channels), int64(f.StrChannels), int64(math.Float32bits(f.FrameShift)))
		writeString(&h, f.Voice)
		writeBytes(&h, lebytes.ViewFloat32Bytes, lebytes.AppendFloat32s, f.Params)
		writeBytes(&h, lebytes.ViewFloat32Bytes, lebytes.AppendFloat32s, f.Str)
	case c.Text != nil:
		writeInts(&h, 4, boolInt(c.Text.Break))
		writeString(&h, c.Text.Text)
	default:
		// The kinds that flow more rarely: their printed form holds every
		// field (maps in key order).
		h.WriteString(fmt.Sprintf("%+v %+v %+v %+v %+v %+v", c.Segments, c.Words, c.Tensors, c.Image, c.Regions, c.Data))
	}
	return h.Sum64()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// writeInts writes vs to h, 8 bytes each.
func writeInts(h *maphash.Hash, vs ...int64) {
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
}

// writeString writes s to h after its length.
func writeString(h *maphash.Hash, s string) {
	writeInts(h, int64(len(s)))
	h.WriteString(s)
}

// writeBytes writes s's length and bytes to h, viewed in place where the
// machine's byte order allows it.
func writeBytes[T any](h *maphash.Hash, view func([]T) ([]byte, bool), appendTo func([]byte, []T) []byte, s []T) {
	writeInts(h, int64(len(s)))
	if b, ok := view(s); ok {
		h.Write(b)
		return
	}
	h.Write(appendTo(nil, s))
}
