package sphinx

// The aligner's pool of decoders, one per job at a time.

import (
	"context"
	"errors"
	"sync"
)

// maxAdded is how many words a decoder may add to its dictionary before
// the pool replaces it: words added for out-of-vocabulary transcript words
// stay in the dictionary, and a fresh decoder bounds that growth.
const maxAdded = 20000

// errClosed is returned by get after close.
var errClosed = errors.New("aligner is closed")

// pool holds up to size decoders, created on demand. C memory is not the
// garbage collector's to manage (sync.Pool would drop decoders without
// freeing them), so the pool is a pair of channels: idle holds decoders
// ready for a job and slots holds one token per decoder not yet created.
type pool struct {
	hmm, dict string
	idle      chan *decoder
	slots     chan struct{}

	mu     sync.Mutex
	closed bool
}

func newPool(size int, hmm, dict string) *pool {
	p := &pool{
		hmm:   hmm,
		dict:  dict,
		idle:  make(chan *decoder, size),
		slots: make(chan struct{}, size),
	}
	for range size {
		p.slots <- struct{}{}
	}
	return p
}

// get returns an idle decoder, or creates one while the pool has room, or
// waits for one until ctx ends. The decoder's decodes take the turns of
// ctx's request (decoder.job) until put.
func (p *pool) get(ctx context.Context) (*decoder, error) {
	d, err := p.take(ctx)
	if err != nil {
		return nil, err
	}
	d.job = ctx
	return d, nil
}

// take is get, without the job.
func (p *pool) take(ctx context.Context) (*decoder, error) {
	select {
	case d := <-p.idle:
		return d, nil
	default:
	}
	select {
	case d := <-p.idle:
		return d, nil
	case <-p.slots:
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			p.slots <- struct{}{}
			return nil, errClosed
		}
		d, err := newDecoder(p.hmm, p.dict)
		if err != nil {
			p.slots <- struct{}{}
			return nil, err
		}
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put returns d to the pool after a job. A decoder that failed, or whose
// dictionary has grown too much, is freed and its slot given back.
func (p *pool) put(d *decoder) {
	d.job = nil
	d.reset()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed || d.broken || d.added > maxAdded {
		d.free()
		p.slots <- struct{}{}
		return
	}
	p.idle <- d
}

// close frees the idle decoders. The engine contract guarantees that no
// job holds one when it is called.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for {
		select {
		case d := <-p.idle:
			d.free()
			p.slots <- struct{}{}
		default:
			return
		}
	}
}
