package orchestrator

// A request's turns on the CPU: its playback deadline, from the audio it
// has delivered.

import (
	"context"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
)

// deadline is when the request's listener runs out of audio: its arrival
// until it has delivered audio, then the time of its first audio plus the
// length of the audio delivered since (the audio of its final stage).
func (rq *request) deadline() time.Time {
	first := rq.firstAudio.Load()
	if first == 0 {
		return rq.submitted
	}
	return rq.submitted.Add(time.Duration(first-1) + time.Duration(rq.audioOut.Load()))
}

// delivered notes audio of the request's final stage, sent to its caller.
func (rq *request) delivered(a *engine.Audio) {
	if a == nil || len(a.Samples) == 0 || a.SampleRate <= 0 {
		return
	}
	if rq.firstAudio.Load() == 0 {
		rq.firstAudio.CompareAndSwap(0, int64(time.Since(rq.submitted))+1)
	}
	rq.audioOut.Add(int64(len(a.Samples)) * int64(time.Second) / int64(a.SampleRate))
}

// requestTurns is an engine.Turner: the request's units take their turns
// by its deadline.
type requestTurns struct{ rq *request }

func (t requestTurns) Turn(ctx context.Context) (func(), error) {
	return t.rq.o.opts.Turns.Acquire(ctx, t.rq.deadline())
}
