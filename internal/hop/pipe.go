package hop

// bufPipe, the pipe from the writer of a Caller's input stream to the body
// of its call.

import (
	"io"
	"sync"
)

// bufPipe is a pipe whose writer waits for the reader only when its
// buffer is full: what is written while the reader is busy (the HTTP/2
// transport sending the last frames) goes out together in the next read,
// in fewer, larger writes to the connection. It bounds what it holds, so
// a slow connection still pushes back on the writer.
type bufPipe struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	max    int
	werr   error // the writer's close error; io.EOF for a clean close
	rerr   error // the reader's close error
	closed bool  // the writer closed
}

// pipeBuffer bounds what a bufPipe holds: a few frames of audio.
const pipeBuffer = 64 << 10

func newBufPipe(max int) *bufPipe {
	p := &bufPipe{max: max}
	p.cond.L = &p.mu
	return p
}

// Write appends b, waiting while the buffer is too full to take it (a
// write larger than the buffer waits until the buffer is empty).
func (p *bufPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.rerr == nil && !p.closed && len(p.buf) > 0 && len(p.buf)+len(b) > p.max {
		p.cond.Wait()
	}
	switch {
	case p.rerr != nil:
		return 0, p.rerr
	case p.closed:
		return 0, io.ErrClosedPipe
	}
	p.buf = append(p.buf, b...)
	p.cond.Broadcast()
	return len(b), nil
}

// Read takes what the buffer holds, up to len(b), waiting while it is
// empty; after the writer closed it, it returns the close error (io.EOF
// for a clean close).
func (p *bufPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 && !p.closed && p.rerr == nil {
		p.cond.Wait()
	}
	if p.rerr != nil {
		return 0, io.ErrClosedPipe
	}
	if len(p.buf) == 0 {
		return 0, p.werr
	}
	n := copy(b, p.buf)
	p.buf = p.buf[:copy(p.buf, p.buf[n:])]
	p.cond.Broadcast()
	return n, nil
}

// CloseWithError ends the writer's side: reads return what is buffered,
// then err (io.EOF when err is nil).
func (p *bufPipe) CloseWithError(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed, p.werr = true, err
		p.cond.Broadcast()
	}
}

// Close ends the reader's side: writes fail, what is buffered is dropped.
func (p *bufPipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = io.ErrClosedPipe
		p.buf = nil
		p.cond.Broadcast()
	}
	return nil
}
