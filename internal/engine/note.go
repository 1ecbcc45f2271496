package engine

// Notes: what a stage tells the caller about its answer that is not an
// error.

import "context"

// A Noter takes the notes of one stage of one request. The runtime puts
// one in the ctx of every stage's Process (an engine in a worker process
// or on a stage server notes there: its notes reach the caller only in
// process).
type Noter interface {
	Note(msg string)
}

type noterKey struct{}

// WithNoter returns ctx carrying n.
func WithNoter(ctx context.Context, n Noter) context.Context {
	return &NoterContext{Context: ctx, Noter: n}
}

// NoterContext is a Context carrying a Noter, for a caller that keeps one
// where it keeps its other state, with nothing allocated (WithNoter makes
// one).
type NoterContext struct {
	context.Context
	Noter Noter
}

// Value implements context.Context.
func (c *NoterContext) Value(key any) any {
	if key == (noterKey{}) {
		return c.Noter
	}
	return c.Context.Value(key)
}

// Note tells the request's caller something it should know about its
// answer that is not an error (text a talker skipped, having nothing of it
// to speak). Without a Noter in ctx it does nothing.
func Note(ctx context.Context, msg string) {
	if n, ok := ctx.Value(noterKey{}).(Noter); ok {
		n.Note(msg)
	}
}
