package hop

// Opening one call of a Chain: the stage's URLs in turn, with pauses
// between passes, and a bound on the wait for the answer to begin.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// open makes the request's call to a server of stage, retrying as the
// Chain's doc says, and returns its answer.
func (c *Chain) open(ctx context.Context, stage int, input *replayReader, contentType string) (*Answer, *callInfo, error) {
	urls := c.Stages[stage]
	if len(urls) == 0 {
		return nil, nil, &NoServerError{Stage: stage}
	}
	client := c.Client
	if client == nil {
		client = &Client{}
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
				return nil, nil, fmt.Errorf("hop: stage %d: %w", stage, err)
			}
		}
		u := urls[(start+a)%len(urls)]
		call := &callInfo{report: CallReport{Stage: stage, URL: u, Attempt: a + 1}, start: time.Now()}
		ans, err := c.openOne(ctx, client, u, input.attempt(), contentType)
		if err == nil {
			input.stopRecording()
			return ans, call, nil
		}
		h := call.report
		h.Duration, h.Err = time.Since(call.start), err
		h.Retrying = a+1 < attempts && Retryable(err) && ctx.Err() == nil && input.replayable()
		if h.Retrying {
			h.RetryURL = urls[(start+a+1)%len(urls)]
		}
		c.onCall(h)
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("hop: stage %d: %w", stage, context.Cause(ctx))
		}
		if !h.Retrying {
			return nil, nil, &CallError{Stage: stage, URL: u, Attempts: a + 1, Err: err}
		}
		last = err
	}
	panic("unreachable") // the last attempt never retries
}

// openOne makes one call, bounded by AnswerTimeout until its answer
// begins. A call that times out is a *TransportError (retryable); the
// answer's body, once it has begun, is not bounded.
func (c *Chain) openOne(ctx context.Context, client *Client, u string, body io.Reader, contentType string) (*Answer, error) {
	limit := c.AnswerTimeout
	if limit == 0 {
		limit = DefaultAnswerTimeout
	}
	if limit < 0 {
		return client.Open(ctx, u, body, contentType)
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(limit, func() {
		cancel(fmt.Errorf("no answer within %s (a hung or stopped server?)", limit))
	})
	ans, err := client.Open(callCtx, u, body, contentType)
	if !t.Stop() && ctx.Err() == nil {
		// The timer fired: the call's own error is the cancellation.
		if err == nil {
			ans.Body.Close()
		}
		cancel(nil)
		return nil, &TransportError{Err: context.Cause(callCtx)}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	ans.Body = &cancelOnClose{ReadCloser: ans.Body, cancel: func() { cancel(nil) }}
	return ans, nil
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
	var he *HTTPError
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
