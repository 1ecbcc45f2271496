package runclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/wire"
)

// Defaults of Chain.
const (
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	DefaultMaxHops    = 32
)

// Chain drives requests through a pipeline's stage servers: it posts the
// prompt to stage 0, then each answer's stage_input to the stage the answer
// names, until an answer is finished.
//
// When a call fails without an answer, or with a 5xx, Chain posts the same
// body to the next server of the same stage (calls are stateless, so this is
// safe), up to Attempts calls per hop. A 4xx answer ends the request at once.
// A Chain is safe for concurrent use; its fields must not change while it
// runs.
type Chain struct {
	// Client makes the calls; nil means the zero Client.
	Client *Client
	// Stages maps each stage id to the base URLs of its servers. Each hop
	// starts at the next URL round-robin, so concurrent requests spread
	// over a stage's servers; a Chain's first hop to a stage starts at its
	// first URL.
	Stages map[int][]string
	// Attempts bounds the calls of one hop; 0 means one per URL of the
	// stage plus one.
	Attempts int
	// Backoff is the pause before calling a URL that already failed in the
	// same hop, doubled on each further pass over the stage's URLs; 0 means
	// DefaultBackoff. A 503's Retry-After lengthens it, up to MaxBackoff.
	Backoff time.Duration
	// MaxBackoff caps one pause; 0 means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxHops bounds the stages one request goes through, against a server
	// that keeps answering "not finished"; 0 means DefaultMaxHops.
	MaxHops int
	// OnHop, when set, is called after every call, failed ones included,
	// from the goroutine that called Run.
	OnHop func(Hop)

	mu   sync.Mutex
	next map[int]int // by stage id, the index of the URL the next hop starts at
}

// Hop describes one call of a chain.
type Hop struct {
	Stage int
	URL   string
	// Attempt counts the calls of this hop, from 1.
	Attempt  int
	Duration time.Duration
	// RequestBytes and ResponseBytes are the sizes of the JSON bodies; 0
	// when the call failed before sending or receiving.
	RequestBytes  int64
	ResponseBytes int64
	// Response is the answer, nil when Err is set.
	Response *wire.RunResponse
	// Err is why the call failed, nil on success.
	Err error
	// Retrying is true when Chain will call another URL after this failure.
	Retrying bool
}

// StageError is a hop that failed: the last call's error, with the stage
// and URL it came from.
type StageError struct {
	Stage int
	URL   string
	// Attempts is the number of calls the hop made.
	Attempts int
	Err      error
}

func (e *StageError) Error() string {
	if e.Attempts > 1 {
		return fmt.Sprintf("stage %d at %s (after %d attempts): %v", e.Stage, e.URL, e.Attempts, e.Err)
	}
	return fmt.Sprintf("stage %d at %s: %v", e.Stage, e.URL, e.Err)
}

func (e *StageError) Unwrap() error { return e.Err }

// NoServerError is an answer naming a stage that Chain has no URL for.
type NoServerError struct {
	Stage int
}

func (e *NoServerError) Error() string {
	return fmt.Sprintf("no server for stage %d: give its URL", e.Stage)
}

// Run drives req, stage 0's request (StageID nil means 0), through the
// chain and returns the finished answer. It stops at the first hop that
// fails (a *StageError), and when ctx ends.
func (c *Chain) Run(ctx context.Context, req *wire.RunRequest) (*wire.RunResponse, error) {
	stage := 0
	if req.StageID != nil {
		stage = *req.StageID
	} else {
		r := *req
		r.StageID = &stage
		req = &r
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("runclient: encode request: %w", err)
	}
	maxHops := c.MaxHops
	if maxHops <= 0 {
		maxHops = DefaultMaxHops
	}
	for range maxHops {
		resp, err := c.hop(ctx, stage, body)
		if err != nil {
			return nil, err
		}
		if resp.Finished {
			return resp, nil
		}
		next := resp.StageID
		body, err = json.Marshal(&wire.RunRequest{StageID: &next, StageInput: quote(resp.StageInput)})
		if err != nil {
			return nil, fmt.Errorf("runclient: encode request: %w", err)
		}
		stage = next
	}
	return nil, fmt.Errorf("runclient: request not finished after %d hops", maxHops)
}

// quote returns s as a JSON string.
func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// hop posts body to a server of stage, retrying as the Chain's doc says.
func (c *Chain) hop(ctx context.Context, stage int, body []byte) (*wire.RunResponse, error) {
	urls := c.Stages[stage]
	if len(urls) == 0 {
		return nil, &NoServerError{Stage: stage}
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
				return nil, fmt.Errorf("runclient: stage %d: %w", stage, err)
			}
		}
		u := urls[(start+a)%len(urls)]
		t0 := time.Now()
		res, err := client.post(ctx, u, body)
		h := Hop{Stage: stage, URL: u, Attempt: a + 1, Duration: time.Since(t0), Err: err}
		if res != nil {
			h.RequestBytes, h.ResponseBytes, h.Response = res.requestBytes, res.responseBytes, res.response
		}
		h.Retrying = err != nil && a+1 < attempts && Retryable(err) && ctx.Err() == nil
		if c.OnHop != nil {
			c.OnHop(h)
		}
		if err == nil {
			return res.response, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("runclient: stage %d: %w", stage, ctx.Err())
		}
		if !h.Retrying {
			return nil, &StageError{Stage: stage, URL: u, Attempts: a + 1, Err: err}
		}
		last = err
	}
	panic("unreachable") // the last attempt never retries
}

// start returns the index of the URL a hop to stage starts at, and moves
// the stage's next start on.
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
		return ctx.Err()
	}
}
