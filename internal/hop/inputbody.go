package hop

// inputBody, the body of a call: made at the transport's first read, so
// that a call refused before it is known to have taken nothing.

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/omnistage/omnistage/internal/engine"
)

// errBodyClosed is what a read of a body closed before it was opened
// returns.
var errBodyClosed = errors.New("hop: the call's body is closed")

// inputBody is a call's body. open makes its reader at the first Read,
// which the transport makes once the connection is up and the request's
// headers are written: until then the call has taken nothing of its job's
// input. A stream body's open starts a writer (startWriter); Close stops
// it and waits for it.
type inputBody struct {
	open func(b *inputBody) (io.Reader, error)

	mu     sync.Mutex
	r      io.Reader // nil until opened
	failed error     // why open failed
	closed bool

	// The writer, when open started one.
	took   atomic.Bool // the writer took a chunk of the job's input
	pipe   *bufPipe
	cancel context.CancelFunc // ends the writer's wait for its upstream
	done   chan struct{}      // closed when the writer returned
	err    error              // the writer's result, written before done closes
}

// startWriter runs write in a goroutine that closes pipe with its result
// when it returns. open calls it.
func (b *inputBody) startWriter(ctx context.Context, pipe *bufPipe, write func(context.Context) error) {
	wctx, cancel := context.WithCancel(ctx)
	b.pipe, b.cancel, b.done = pipe, cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		b.err = write(wctx)
		pipe.CloseWithError(b.err)
	}()
}

func (b *inputBody) Read(p []byte) (int, error) {
	r, err := b.reader()
	if err != nil {
		return 0, err
	}
	return r.Read(p)
}

// reader opens the body at its first call.
func (b *inputBody) reader() (io.Reader, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil && b.failed == nil {
		if b.closed {
			return nil, errBodyClosed
		}
		b.r, b.failed = b.open(b)
	}
	return b.r, b.failed
}

// track returns in, which the writer reads the job's input from, noting
// when a chunk is taken.
func (b *inputBody) track(in engine.Source) engine.Source { return trackedSource{in, &b.took} }

type trackedSource struct {
	engine.Source
	took *atomic.Bool
}

func (s trackedSource) Recv(ctx context.Context) (engine.Chunk, error) {
	ch, err := s.Source.Recv(ctx)
	if err == nil {
		s.took.Store(true)
	}
	return ch, err
}

// taken reports whether the call may have taken some of its job's input:
// the body was opened and, when it has a writer, that writer took a chunk
// (a stream's header frame takes nothing). Call it after Close, which
// stops the writer.
func (b *inputBody) taken() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		return b.took.Load()
	}
	return b.r != nil || b.failed != nil
}

// inputErr is why the body could not be opened (its input could not be
// read), or nil.
func (b *inputBody) inputErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// Close stops the writer, if one started, waits for it and returns its
// error. The transport and the Caller may both call it, concurrently too.
func (b *inputBody) Close() error {
	b.mu.Lock()
	b.closed = true
	done := b.done
	b.mu.Unlock()
	if done == nil {
		return nil
	}
	// A writer blocked on the pipe or on its upstream stops.
	b.cancel()
	_ = b.pipe.Close()
	<-done
	return b.err
}
