package engine

// Turns: how the units of CPU work of a request take their turn.

import (
	"context"
	"time"
)

// A Turner gives the units of CPU work of one request their turns (see
// Turn). The runtime puts one in the ctx of every stage's Process when it
// shares the CPU by playback deadline (package turns).
type Turner interface {
	Turn(ctx context.Context) (CPUTurn, error)
}

// CPUTurn is a turn on the CPU held by one unit of work, used by one
// goroutine at a time.
type CPUTurn interface {
	// Yield lets a unit of another request that is due first take the
	// turn, if one waits, and waits for the turn back; it returns at once
	// when none waits. A unit that runs long in one piece calls it
	// between its pieces (a sentence's vocoding, at each block). On error
	// (ctx's) the turn is no longer held.
	Yield(ctx context.Context) error
	// End ends the turn. Calling it again, or after Yield failed, does
	// nothing.
	End()
}

type turnerKey struct{}

// WithTurner returns ctx carrying t.
func WithTurner(ctx context.Context, t Turner) context.Context {
	return context.WithValue(ctx, turnerKey{}, t)
}

// Turn waits for the turn of ctx's request to run one unit of CPU work (a
// sentence's synthesis, its vocoding, its alignment: a call that computes
// for a while and waits for nothing) and returns it, or ctx's error. An
// engine calls it before each such unit and ends the turn after it, never
// holding it across a Send or a Recv, which may wait for the other
// requests' turns. Without a Turner in ctx (a test, a program that is its
// own process) it returns at once, a turn whose methods do nothing.
func Turn(ctx context.Context) (CPUTurn, error) {
	t, ok := ctx.Value(turnerKey{}).(Turner)
	if !ok {
		return noTurn{}, nil
	}
	return t.Turn(ctx)
}

// noTurn is the turn of a ctx without a Turner.
type noTurn struct{}

func (noTurn) Yield(context.Context) error { return nil }
func (noTurn) End()                        {}

type neededKey struct{}

// NeededAt returns ctx for units of work whose result the request's
// listener needs only once its playback reaches at, a position in the
// request's audio (an aligner's sentence, whose words are needed as it
// plays): their turns are due then, rather than by the request's own
// deadline, so that they give way to the audio that plays first.
func NeededAt(ctx context.Context, at time.Duration) context.Context {
	return context.WithValue(ctx, neededKey{}, at)
}

// Needed returns the position NeededAt put in ctx, if any, for a Turner.
func Needed(ctx context.Context) (time.Duration, bool) {
	at, ok := ctx.Value(neededKey{}).(time.Duration)
	return at, ok
}
