// Package sessions tracks the long-lived sessions of a server (the live
// speech WebSocket's, Wyoming's connections), which outlive the requests
// an HTTP server's shutdown waits for, so that the server's shutdown ends
// them in two steps: first each session is told to finish what it is
// doing and end (Stopping), then, once the shutdown's time is up, the
// ones left are cut (Hard).
package sessions

import (
	"context"
	"sync"
)

// Group is the sessions of one server. The zero value is not ready: use
// New.
type Group struct {
	stopping context.Context
	stop     context.CancelFunc
	hard     context.Context
	cut      context.CancelFunc

	mu sync.Mutex // orders Add against Drain's start
	wg sync.WaitGroup
}

// New returns an empty Group.
func New() *Group {
	g := &Group{}
	g.stopping, g.stop = context.WithCancel(context.Background())
	g.hard, g.cut = context.WithCancel(context.Background())
	return g
}

// Add counts a new session; it returns false, and counts nothing, once
// the group is stopping. Every Add that returns true needs a Done.
func (g *Group) Add() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping.Err() != nil {
		return false
	}
	g.wg.Add(1)
	return true
}

// Done counts a session's end.
func (g *Group) Done() { g.wg.Done() }

// Stopping is done once the sessions must end: a session waiting for its
// client's next utterance ends then, one speaking ends when it has
// spoken.
func (g *Group) Stopping() context.Context { return g.stopping }

// Hard is done once the sessions left must end at once, their work
// aborted.
func (g *Group) Hard() context.Context { return g.hard }

// Stop makes the group stop: no new session, and Stopping done.
func (g *Group) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stop()
}

// Drain stops the group and waits for its sessions to end until ctx
// ends; then it cuts the ones left (Hard) and waits for them too. It
// reports whether they all ended before ctx did.
func (g *Group) Drain(ctx context.Context) bool {
	g.Stop()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	g.cut()
	<-done
	return false
}
