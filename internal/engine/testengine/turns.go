package testengine

// Turns: an engine.Turner that counts the turns an engine takes.

import (
	"context"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
)

// Turns is an engine.Turner for an engine's tests: it gives every turn at
// once and counts the turns taken, ended and yielded, and the turns held
// at once at most.
type Turns struct {
	mu                    sync.Mutex
	taken, ended, yielded int
	held, most            int
}

var _ engine.Turner = (*Turns)(nil)

// Context returns ctx carrying t.
func (t *Turns) Context(ctx context.Context) context.Context { return engine.WithTurner(ctx, t) }

// Turn implements engine.Turner.
func (t *Turns) Turn(ctx context.Context) (engine.CPUTurn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.taken++
	t.held++
	t.most = max(t.most, t.held)
	return &countedTurn{t: t, held: true}, nil
}

// Counts returns the turns taken, ended and yielded so far, and the most
// held at once.
func (t *Turns) Counts() (taken, ended, yielded, most int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.taken, t.ended, t.yielded, t.most
}

type countedTurn struct {
	t    *Turns
	held bool
}

func (c *countedTurn) Yield(ctx context.Context) error {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if !c.held {
		return nil
	}
	c.t.yielded++
	if err := ctx.Err(); err != nil {
		c.held = false // a failed Yield loses the turn
		c.t.held--
		return err
	}
	return nil
}

func (c *countedTurn) End() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.held {
		c.held = false
		c.t.held--
		c.t.ended++
	}
}
