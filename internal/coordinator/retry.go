package coordinator

// Opening one call of a Chain: the stage's URLs in turn, with pauses
// between passes, until a call's answer has begun (its headers and its
// first chunk, under bounds on each silence).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/omnistage/omnistage/internal/hop"
)

// open makes the request's call to a server of stage, retrying as the
// Chain's doc says, and returns its answer once it has begun.
func (c *Chain) open(ctx context.Context, stage int, input *replayReader, contentType string) (*begun, error) {
	urls := c.Stages[stage]
	if len(urls) == 0 {
		return nil, &NoServerError{Stage: stage}
	}
	client := c.Client
	if client == nil {
		client = &hop.Client{}
	}
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = len(urls) + 1
	}
	start := c.start(stage, len(urls))
	var last error
	for a := range attempts {
		if a >= len(urls) {
			if err := sleep(ctx, c.pause(a/len(urls), last)); err != nil {
				return nil, fmt.Errorf("hop: stage %d: %w", stage, err)
			}
		}
		u := urls[(start+a)%len(urls)]
		call := &callInfo{report: CallReport{Stage: stage, URL: u, Attempt: a + 1}, start: time.Now()}
		b, err := c.openOne(ctx, client, u, input.attempt(), contentType, call)
		if err == nil {
			input.stopRecording()
			return b, nil
		}
		h := call.report
		h.Duration, h.Err = time.Since(call.start), err
		h.Retrying = a+1 < attempts && hop.Retryable(err) && ctx.Err() == nil && input.replayable()
		if h.Retrying {
			h.RetryURL = urls[(start+a+1)%len(urls)]
		}
		c.onCall(h)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("hop: stage %d: %w", stage, context.Cause(ctx))
		}
		if !h.Retrying {
			return nil, &CallError{Stage: stage, URL: u, Attempts: a + 1, Err: err}
		}
		last = err
	}
	panic("unreachable") // the last attempt never retries
}

// openOne makes one call and waits for its answer to begin, each silence
// bounded (see watch). A silence past its bound is a *TransportError
// (retryable); so is an answer cut short before its first chunk.
func (c *Chain) openOne(ctx context.Context, client *hop.Client, u string, body io.Reader, contentType string, call *callInfo) (*begun, error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	w := c.newWatch(cancel)
	call.silence = func() error {
		if ctx.Err() == nil && callCtx.Err() != nil {
			return context.Cause(callCtx)
		}
		return nil
	}
	ans, err := client.Open(callCtx, u, w.input(body), contentType)
	if err != nil {
		w.stop()
		if cause := call.silence(); cause != nil {
			err = &hop.TransportError{Err: cause}
		}
		cancel(nil)
		return nil, err
	}
	ans.Body = &cancelOnClose{ReadCloser: ans.Body, cancel: func() {
		w.stop()
		cancel(nil)
	}}
	w.began()
	b, err := begin(ans, call, w)
	if err != nil {
		ans.Body.Close()
		return nil, err
	}
	return b, nil
}

// cancelOnClose ends a call's context when its answer's body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// start returns the index of the URL the request's calls to stage start
// at, and moves the stage's next start on.
func (c *Chain) start(stage, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = map[int]int{}
	}
	i := c.next[stage] % n
	c.next[stage] = (i + 1) % n
	return i
}

// pause returns the wait before a call of the given pass (1 for the second
// pass over a stage's URLs), after the error last.
func (c *Chain) pause(pass int, last error) time.Duration {
	d := c.Backoff
	if d <= 0 {
		d = DefaultBackoff
	}
	ceiling := c.MaxBackoff
	if ceiling <= 0 {
		ceiling = DefaultMaxBackoff
	}
	d <<= min(pass-1, 16)
	var he *hop.HTTPError
	if errors.As(last, &he) && he.RetryAfter > d {
		d = he.RetryAfter
	}
	return min(d, ceiling)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
