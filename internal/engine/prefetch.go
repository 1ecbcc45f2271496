package engine

// Prefetch: a Source read ahead on a goroutine, so that its producer
// never waits for the engine.

import (
	"context"
	"sync"
)

// Prefetch returns a Source that yields src's chunks, read on a goroutine
// of its own as fast as src gives them and held in memory until taken,
// and stop, which ends the reading and waits for it. An engine that may
// wait for something else mid-job (a decoder shared with other jobs)
// reads its input through it so that upstream stages, and the request's
// output beside it, are not held back meanwhile; what it holds is bounded
// by what upstream may make (the audio budget). The reading ends at src's
// end or error, which the Source then returns after the chunks, or when
// ctx ends; call stop before the job returns.
func Prefetch(ctx context.Context, src Source) (Source, func()) {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetch{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := src.Recv(ctx)
			p.mu.Lock()
			if err != nil {
				p.err = err
			} else {
				p.chunks = append(p.chunks, c)
			}
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return p, func() {
		cancel()
		<-done
	}
}

type prefetch struct {
	more   chan struct{} // a token after each change, for the one reader
	mu     sync.Mutex
	chunks []Chunk // read, not yet taken
	err    error   // how the reading ended, once it has
}

// Recv implements Source.
func (p *prefetch) Recv(ctx context.Context) (Chunk, error) {
	for {
		p.mu.Lock()
		if len(p.chunks) > 0 {
			c := p.chunks[0]
			p.chunks[0] = Chunk{}
			p.chunks = p.chunks[1:]
			p.mu.Unlock()
			return c, nil
		}
		err := p.err
		p.mu.Unlock()
		if err != nil {
			return Chunk{}, err
		}
		select {
		case <-p.more:
		case <-ctx.Done():
			return Chunk{}, ctx.Err()
		}
	}
}
