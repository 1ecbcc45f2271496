package engine

// Turns: how the units of CPU work of a request take their turn.

import "context"

// A Turner gives the units of CPU work of one request their turns (see
// Turn). The runtime puts one in the ctx of every stage's Process when it
// shares the CPU by playback deadline (package turns).
type Turner interface {
	Turn(ctx context.Context) (end func(), err error)
}

type turnerKey struct{}

// WithTurner returns ctx carrying t.
func WithTurner(ctx context.Context, t Turner) context.Context {
	return context.WithValue(ctx, turnerKey{}, t)
}

// Turn waits for the turn of ctx's request to run one unit of CPU work (a
// sentence's synthesis, its vocoding, its alignment: a call that computes
// for a while and waits for nothing) and returns the function that ends
// the turn, or ctx's error. An engine calls it around each such unit,
// never across a Send or a Recv, which may wait for the other requests'
// turns. Without a Turner in ctx (a test, a program that is its own
// process) it returns at once.
func Turn(ctx context.Context) (end func(), err error) {
	t, ok := ctx.Value(turnerKey{}).(Turner)
	if !ok {
		return noTurn, nil
	}
	return t.Turn(ctx)
}

func noTurn() {}
