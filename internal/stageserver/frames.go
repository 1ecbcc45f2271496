package stageserver

// The input of a streamed call: the data frames of its request body, read
// ahead of the stage by a goroutine of its own.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/payload"
)

// frameSource is a streamed hop's input: the data frames of its request
// body, read ahead of the stage, at most its capacity, by a goroutine of
// its own. So the hop notices a caller that goes away while its stage
// reads nothing (HTTP/1.1 tells a handler so only through its reads), and
// a stage's Recv ends with its ctx. While the frames read ahead fill its
// capacity, the reader reads nothing either: then it watches the
// connection instead (peerGone), every peerProbe.
type frameSource struct {
	frames   chan engine.Chunk
	done     chan struct{} // closed when the reader returned
	stop     chan struct{} // closed to stop the reader
	body     *bodyReader
	peerGone func() bool  // nil when the connection cannot be watched
	probe    *time.Ticker // while the input is full, made at the first time
	fail     func(error)
	err      error // why the frames ended; written before frames closes
	// failure is the input's failure that ended the hop, if one did
	// (see readFrames); written before done closes.
	failure error

	closeOnce sync.Once
	unread    bool // close left the body unread
}

// peerProbe is how often a hop whose input is full looks whether its
// caller closed the connection.
const peerProbe = 100 * time.Millisecond

// readFrames starts reading sr's data frames into a frameSource holding
// up to n; br is the buffer sr reads body through. When the input fails
// in a way that ends the hop (any error but the stream's end and a frame
// refused for want of memory, which the stage gets in turn), or peerGone
// reports that the caller closed the connection while the frames fill the
// source, fail is called with the hop's error for it.
func readFrames(sr *payload.StreamReader, br *bufio.Reader, body *bodyReader, n int, peerGone func() bool, fail func(error)) *frameSource {
	f := &frameSource{frames: make(chan engine.Chunk, n), done: make(chan struct{}), stop: make(chan struct{}),
		body: body, peerGone: peerGone, fail: fail}
	go func() {
		defer close(f.done)
		for {
			body.nextFrame(br.Buffered())
			c, err := sr.Next()
			if err != nil {
				f.end(err)
				return
			}
			if !f.send(c) {
				return
			}
		}
	}()
	return f
}

// end ends the frames with err, the stream reader's.
func (f *frameSource) end(err error) {
	var busy *membudget.BusyError
	// A read cut because the hop is over is no failure of the input.
	if !errors.Is(err, io.EOF) && !errors.Is(err, errBodyStopped) {
		if err = f.body.inputError(err); !errors.As(err, &busy) {
			f.failed(err)
		}
	}
	f.err = err
	close(f.frames)
}

// failed ends the hop with err, the input's failure.
func (f *frameSource) failed(err error) {
	f.failure = err
	f.fail(err)
}

// send hands c to the stage, and reports whether the reader goes on:
// not once stopped, nor when the caller closed the connection meanwhile.
func (f *frameSource) send(c engine.Chunk) bool {
	select {
	case f.frames <- c:
		return true
	case <-f.stop:
		return false
	default:
	}
	var probe <-chan time.Time
	if f.peerGone != nil {
		if f.probe == nil {
			f.probe = time.NewTicker(peerProbe)
		} else {
			f.probe.Reset(peerProbe)
		}
		defer f.probe.Stop()
		probe = f.probe.C
	}
	for {
		select {
		case f.frames <- c:
			return true
		case <-f.stop:
			return false
		case <-probe:
			if f.peerGone() {
				f.failed(errCallerGone)
				f.err = errCallerGone
				close(f.frames)
				return false
			}
		}
	}
}

// Recv implements engine.Source.
func (f *frameSource) Recv(ctx context.Context) (engine.Chunk, error) {
	select {
	case c, ok := <-f.frames:
		if !ok {
			return engine.Chunk{}, f.err
		}
		return c, nil
	case <-ctx.Done():
		return engine.Chunk{}, ctx.Err()
	}
}

// inputFailure stops the reader and returns the input's failure that
// ended the hop, or nil.
func (f *frameSource) inputFailure() error {
	f.close()
	return f.failure
}

// close stops the reader, cutting a read under way if the body has not
// ended, and waits for it. It reports whether the body was left unread;
// a second call reports what the first did.
func (f *frameSource) close() bool {
	f.closeOnce.Do(func() {
		close(f.stop)
		f.unread = f.body.abort()
		<-f.done
	})
	return f.unread
}
