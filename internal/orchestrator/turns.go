package orchestrator

// A request's turns on the CPU: its playback deadline, from the audio it
// has delivered.

import (
	"context"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/turns"
)

// deadline is when the request's units are due: its arrival until it has
// delivered audio, then leadTime before its listener runs out of audio
// (the time of its first audio plus the length of the audio delivered
// since, the audio output it selected, whichever stage is final: with
// word timestamps, the aligner is).
func (rq *request) deadline() time.Time {
	first := rq.firstAudio.Load()
	if first == 0 {
		return rq.submitted
	}
	return rq.submitted.Add(time.Duration(first-1) + time.Duration(rq.audioOut.Load()) - leadTime)
}

// leadTime is how long before a request's audio runs out its units are
// due: about what the next audio takes to make under load (a wait for a
// turn behind sentences being synthesized, the talker's next sentence,
// the vocoder's first block of it), so that a stream's next sentence is
// ready before its listener hears a gap. A request that has not spoken
// yet is due at its arrival; one whose audio runs out within leadTime
// goes ahead of those that arrived since.
const leadTime = 500 * time.Millisecond

// playsAudio reports whether stage id's output is the audio the request
// returns, which its listener plays: the stage of its audio output.
func (rq *request) playsAudio(id int) bool {
	for _, out := range rq.sel.Outputs {
		if out.Stage == id && out.Kind == engine.KindAudio {
			return true
		}
	}
	return false
}

// delivered notes audio of the request's audio output, sent to its caller.
func (rq *request) delivered(a *engine.Audio) {
	if a == nil || len(a.Samples) == 0 || a.SampleRate <= 0 {
		return
	}
	if rq.firstAudio.Load() == 0 {
		rq.firstAudio.CompareAndSwap(0, int64(time.Since(rq.submitted))+1)
	}
	rq.audioOut.Add(int64(len(a.Samples)) * int64(time.Second) / int64(a.SampleRate))
}

// playsAt is when the request's listener reaches position at of its
// audio: at after its first audio, or after now while it has none.
func (rq *request) playsAt(at time.Duration) time.Time {
	first := rq.firstAudio.Load()
	if first == 0 {
		return time.Now().Add(at)
	}
	return rq.submitted.Add(time.Duration(first-1) + at)
}

// requestTurns is an engine.Turner: the request's units take their turns
// by its deadline, or, those whose ctx says when their result is needed
// (engine.NeededAt), by when its listener reaches that audio.
type requestTurns struct{ rq *request }

func (t requestTurns) Turn(ctx context.Context) (engine.CPUTurn, error) {
	rt := requestTurn{rq: t.rq}
	rt.at, rt.needed = engine.Needed(ctx)
	turn, err := t.rq.o.opts.Turns.Acquire(ctx, rt.due())
	if err != nil {
		return nil, err
	}
	rt.t = turn
	return rt, nil
}

// requestTurn is a turn of the request's, which yields by its due time
// at the time.
type requestTurn struct {
	t      *turns.Turn
	rq     *request
	at     time.Duration // when needed, the audio it is needed for
	needed bool
}

func (t requestTurn) due() time.Time {
	if t.needed {
		return t.rq.playsAt(t.at)
	}
	return t.rq.deadline()
}

func (t requestTurn) Yield(ctx context.Context) error { return t.t.Yield(ctx, t.due()) }
func (t requestTurn) End()                            { t.t.End() }

// Due implements engine.Duer: when the request's units in ctx are due.
func (t requestTurns) Due(ctx context.Context) time.Time {
	rt := requestTurn{rq: t.rq}
	rt.at, rt.needed = engine.Needed(ctx)
	return rt.due()
}
