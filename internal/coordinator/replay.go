package coordinator

// The input of a Chain's calls to one stage of a request, recorded until
// an answer begins (up to maxReplay bytes), so that a retry reads it again
// from its start.

import (
	"errors"
	"io"
	"sync"
)

// replayReader is the input of a request's calls to one stage, read by one
// call after another: until a call's answer has begun it records what
// calls read, so that the next call to the stage reads it again before the
// rest. Past maxReplay bytes it stops recording: the input can no longer
// be sent again, and the calls to the stage no longer move.
// Only the latest call may read; an earlier one, which the transport may
// still be reading for, gets an error, and what its read under way brings
// is kept for the latest.
type replayReader struct {
	src    io.Reader
	readMu sync.Mutex // one read of src at a time; held while it blocks

	mu        sync.Mutex // guards the rest; never held while src blocks
	buf       []byte     // what calls read of src, while recording
	recording bool
	current   *replayCall
	srcErr    error
}

func newReplayReader(src io.Reader) *replayReader {
	return &replayReader{src: src, recording: true}
}

// attempt returns the reader of a new call: it reads what the calls before
// it read, then the rest of the input.
func (r *replayReader) attempt() io.Reader {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = &replayCall{r: r}
	return r.current
}

// stopRecording ends the recording: the latest call got its answer.
func (r *replayReader) stopRecording() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recording = false
}

// replayable reports whether a new call can read the input from its start.
func (r *replayReader) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recording
}

var errStaleCall = errors.New("hop: the input moved on to a later call")

// maxReplay bounds what a replayReader records: a stage that takes that
// much of its input before its first output is not called again
// elsewhere.
const maxReplay = 8 << 20

type replayCall struct {
	r   *replayReader
	off int // bytes of r.buf read
}

// fromBuf hands c what is recorded and c has not read yet; ok is false
// when there is nothing, and c must read src. Call it with r.mu held.
func (c *replayCall) fromBuf(p []byte) (n int, ok bool, err error) {
	r := c.r
	if r.current != c {
		return 0, true, errStaleCall
	}
	if c.off < len(r.buf) {
		n = copy(p, r.buf[c.off:])
		c.off += n
		if c.off == len(r.buf) && !r.recording {
			r.buf, c.off = nil, 0
		}
		return n, true, nil
	}
	if r.srcErr != nil {
		return 0, true, r.srcErr
	}
	return 0, false, nil
}

func (c *replayCall) Read(p []byte) (int, error) {
	r := c.r
	r.mu.Lock()
	n, ok, err := c.fromBuf(p)
	r.mu.Unlock()
	if ok {
		return n, err
	}
	r.readMu.Lock()
	defer r.readMu.Unlock()
	// A read that was blocked when this call began may have brought data.
	r.mu.Lock()
	n, ok, err = c.fromBuf(p)
	r.mu.Unlock()
	if ok {
		return n, err
	}
	n, err = r.src.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srcErr = err
	switch {
	case r.current != c:
		// This call went stale while it read: the latest one gets it.
		r.buf = append(r.buf, p[:n]...)
		return 0, errStaleCall
	case r.recording && len(r.buf)+n > maxReplay:
		// c has read all that was recorded: the record can go.
		r.recording, r.buf, c.off = false, nil, 0
	case r.recording:
		r.buf = append(r.buf, p[:n]...)
		c.off += n
	}
	return n, err
}
