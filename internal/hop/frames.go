package hop

// The input of a streamed call: the data frames of its request body, read
// ahead of the stage by a goroutine of its own.

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/membudget"
	"github.com/omnistage/omnistage/internal/payload"
)

// frameSource is a streamed hop's input: the data frames of its request
// body, read ahead of the stage, at most its capacity, by a goroutine of
// its own. So the hop notices a caller that goes away while its stage
// reads nothing (HTTP/1.1 tells a handler so only through its reads), and
// a stage's Recv ends with its ctx.
type frameSource struct {
	frames chan engine.Chunk
	done   chan struct{} // closed when the reader returned
	stop   chan struct{} // closed to stop the reader
	body   *bodyReader
	err    error // why the frames ended; written before frames closes

	closeOnce sync.Once
	unread    bool // close left the body unread
}

// readFrames starts reading sr's data frames into a frameSource holding
// up to n. When the body fails (not a bad payload, nor a frame refused for
// want of memory: the connection), gone is called with the cause.
func readFrames(sr *payload.StreamReader, body *bodyReader, n int, gone func(error)) *frameSource {
	f := &frameSource{frames: make(chan engine.Chunk, n), done: make(chan struct{}), stop: make(chan struct{}), body: body}
	go func() {
		defer close(f.done)
		for {
			c, err := sr.Next()
			if err != nil {
				var pe *payload.Error
				var busy *membudget.BusyError
				if !errors.Is(err, io.EOF) && !errors.As(err, &busy) && (!errors.As(err, &pe) || pe.Code == payload.CodeTruncated) {
					gone(err)
				}
				f.err = err
				close(f.frames)
				return
			}
			select {
			case f.frames <- c:
			case <-f.stop:
				return
			}
		}
	}()
	return f
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
