// Package runclient calls POST /v1/run on headless stage servers: one call
// with Client.Run, or a whole request, stage after stage, with Chain.Run.
//
// Errors are typed so callers can decide what to do with them. An
// *HTTPError is an answer with a non-2xx status: a 4xx is the caller's fault
// and is never retried; a 5xx is retryable. A *TransportError means no
// answer arrived (refused connection, reset, truncated body): retryable,
// because /v1/run calls keep no state on the server, so running one twice is
// harmless. A *TooLargeError is an answer over the client's size cap, and is
// not retried.
package runclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/omnistage/omnistage/internal/wire"
)

// DefaultMaxResponseBytes caps the body of an answer when
// Client.MaxResponseBytes is zero.
const DefaultMaxResponseBytes = 64 << 20

// RunPath is the path of the one-stage endpoint on a stage server.
const RunPath = "/v1/run"

// Client posts /v1/run calls. The zero value is ready and shares one
// connection pool with every other zero-value Client. A Client is safe for
// concurrent use.
type Client struct {
	// HTTP sends the calls; nil means a shared client whose Transport keeps
	// connections alive across calls. Its Timeout, if any, bounds each call.
	HTTP *http.Client
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// MaxResponseBytes caps an answer's body; 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// result is a call's answer and the sizes of the two JSON bodies.
type result struct {
	response                    *wire.RunResponse
	requestBytes, responseBytes int64
}

// maxErrorBody caps what is read of an error answer.
const maxErrorBody = 64 << 10

// HTTPError is an answer with a non-2xx status, decoded from the OpenAI
// error shape {"error": {"message", "type", "code"}}. When the body is not
// that shape, Message holds the start of the body (or the status text).
type HTTPError struct {
	Status  int
	Type    string
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After, or 0.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	code := e.Code
	if code == "" {
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(e.Status), " ", "_"))
	}
	return fmt.Sprintf("%d %s: %s", e.Status, code, e.Message)
}

// Temporary reports whether another replica might answer differently: true
// for 5xx statuses, false for 4xx ones (the caller's fault).
func (e *HTTPError) Temporary() bool { return e.Status >= 500 }

// TransportError is a call that got no complete answer: the connection
// failed, or broke before the body was read to its end.
type TransportError struct {
	Err error
}

func (e *TransportError) Error() string { return "transport: " + e.Err.Error() }

func (e *TransportError) Unwrap() error { return e.Err }

// TooLargeError is an answer whose body exceeds the client's cap.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("answer is larger than the %d-byte limit", e.Limit)
}

// Retryable reports whether err, returned by Client.Run, may succeed on
// another replica of the same stage: a transport error or a 5xx answer.
// Context errors, 4xx answers, oversized and malformed answers are not
// retryable.
func Retryable(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Temporary()
	}
	var te *TransportError
	return errors.As(err, &te)
}

// NewHTTPClient returns an HTTP client with its own Transport, tuned for
// many calls to a few stage servers: it keeps enough idle connections per
// host for concurrent requests to reuse them.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	return &http.Client{Transport: t}
}

var sharedHTTP = sync.OnceValue(NewHTTPClient)

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return sharedHTTP()
}

func (c *Client) limit() int64 {
	if c.MaxResponseBytes > 0 {
		return c.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

// Run posts req to the stage server at base (scheme and host, with or
// without RunPath) and returns its answer.
func (c *Client) Run(ctx context.Context, base string, req *wire.RunRequest) (*wire.RunResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("runclient: encode request: %w", err)
	}
	res, err := c.post(ctx, base, body)
	if err != nil {
		return nil, err
	}
	return res.response, nil
}

// post sends one encoded request body.
func (c *Client) post(ctx context.Context, base string, body []byte) (*result, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, RunURL(base), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("runclient: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.http().Do(hr)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	limit := c.limit()
	if resp.StatusCode/100 != 2 {
		// An error answer is short; reading a little of it is enough.
		limit = min(limit, maxErrorBody)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, transportError(ctx, err)
	}
	res := &result{requestBytes: int64(len(body)), responseBytes: int64(len(data))}
	if resp.StatusCode/100 != 2 {
		return res, decodeError(resp, data)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	var out wire.RunResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return res, fmt.Errorf("runclient: malformed answer: %w", err)
	}
	if err := checkResponse(&out); err != nil {
		return res, err
	}
	res.response = &out
	return res, nil
}

// Probe sends GET base+path (a stage server's /health or /ready) and
// returns nil when the answer is 200, an *HTTPError for another status, or
// a *TransportError when no answer came.
func (c *Client) Probe(ctx context.Context, base, path string) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("runclient: %w", err)
	}
	if c.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.http().Do(hr)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	// Read the (small) body to its end so the connection is reused.
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp, data)
	}
	return nil
}

// transportError types an error of the HTTP exchange, leaving the context's
// own errors as they are so callers can tell cancellation from failure.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("runclient: %w", ctx.Err())
	}
	return &TransportError{Err: err}
}

func checkResponse(r *wire.RunResponse) error {
	switch {
	case r.Finished && r.Output == nil:
		return errors.New("runclient: malformed answer: finished without output")
	case !r.Finished && r.StageInput == "":
		return errors.New("runclient: malformed answer: not finished and no stage_input")
	case !r.Finished && r.StageID < 0:
		return fmt.Errorf("runclient: malformed answer: next stage_id %d", r.StageID)
	}
	return nil
}

func decodeError(resp *http.Response, data []byte) *HTTPError {
	e := &HTTPError{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	var body struct {
		Error *wire.ErrorDetail `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		e.Type, e.Code, e.Message = body.Error.Type, body.Error.Code, body.Error.Message
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 512)]))
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// RunURL returns the /v1/run URL of the stage server at base. base may be
// the server's root ("http://host:8101") or already end in RunPath.
func RunURL(base string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, RunPath) {
		return base
	}
	return base + RunPath
}
