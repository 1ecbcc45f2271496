package hop

// Client, the calls a coordinator or a Caller makes to stage servers (a
// streamed /v1/run, the probes), and the typed errors of their answers.

import (
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

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// Client makes streamed POST /v1/run calls (and the /health and /ready
// probes) to stage servers. The zero value is ready and shares one
// connection pool with every other zero-value Client. A Client is safe for
// concurrent use.
//
// Errors are typed so callers can decide what to do with them. An
// *HTTPError is an answer with a non-2xx status (or an error frame that
// ended a stream): a 4xx is the caller's fault and is never retried; a
// 5xx is retryable. A *TransportError means no answer arrived (refused
// connection, reset, truncated body): retryable, because /v1/run calls
// keep no state on the server, so running one twice is harmless.
type Client struct {
	// HTTP sends the calls; nil means a shared client made by
	// NewHTTPClient. Its Timeout, if any, bounds each call.
	HTTP *http.Client
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// TracerProvider, when set, traces each /v1/run call as a client span
	// (child of the span in the call's ctx) and sends its traceparent
	// header; the probes are not traced. Set it before the first call.
	TracerProvider trace.TracerProvider

	runOnce sync.Once
	runHTTP *http.Client // HTTP, traced when TracerProvider is set
}

// maxErrorBody caps what is read of an error answer.
const maxErrorBody = 64 << 10

// HTTPError is an answer with a non-2xx status, decoded from the OpenAI
// error shape {"error": {"message", "type", "code"}}, or the error frame
// that ended a streamed answer. When the body is not that shape, Message
// holds the start of the body (or the status text).
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
// failed, or broke before the body was read to its end. Unsent reports
// that the call took nothing of its input (its connection was refused, or
// broke before the request's body was read): it may be made again on
// another server.
type TransportError struct {
	Err    error
	Unsent bool
}

func (e *TransportError) Error() string { return "transport: " + e.Err.Error() }

func (e *TransportError) Unwrap() error { return e.Err }

// Retryable reports whether err, returned by a Client call, may succeed on
// another replica of the same stage: a transport error or a 5xx answer.
// Context errors, 4xx answers and malformed answers are not retryable.
func Retryable(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Temporary()
	}
	var te *TransportError
	return errors.As(err, &te)
}

// NewHTTPClient returns an HTTP client with its own transport, tuned for
// many calls to a few stage servers: it keeps enough idle connections per
// host for concurrent requests to reuse them. Streamed calls go over
// HTTP/1.1 with full-duplex bodies to http:// servers; see the package
// documentation for why.
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

// run returns the client of /v1/run calls: http(), traced when the
// client has a TracerProvider.
func (c *Client) run() *http.Client {
	c.runOnce.Do(func() {
		c.runHTTP = c.http()
		if c.TracerProvider != nil {
			traced := *c.runHTTP
			traced.Transport = otelhttp.NewTransport(traced.Transport,
				otelhttp.WithTracerProvider(c.TracerProvider),
				otelhttp.WithPropagators(telemetry.Propagator),
				otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " /v1/run" }))
			c.runHTTP = &traced
		}
	})
	return c.runHTTP
}

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() { c.http().CloseIdleConnections() }

// Answer is a streamed answer, its headers read and its body still to
// come.
type Answer struct {
	// RequestID is the request the hop belongs to.
	RequestID string
	// Stage is the stage that must receive Body next, or, when Finished,
	// the stage that ran.
	Stage int
	// Finished reports whether Body is the request's final output.
	Finished bool
	// Output, when not empty, is the kind of Body's data, which the
	// request selected as an output.
	Output engine.Kind
	// Body is the payload stream. The caller reads it to its end and
	// closes it, or closes it early to end the call.
	Body io.ReadCloser
}

// Open starts a streamed call to the stage server at base. body is the
// call's input, read as the call goes on: a payload stream (contentType
// ContentType) or stage 0's JSON request (contentType "application/json").
// Open returns once the answer's headers have arrived; the server sends
// them as soon as the stage is bound, before its output. Closing the
// answer's Body, or ending ctx, ends the call: the server then stops the
// stage.
func (c *Client) Open(ctx context.Context, base string, body io.Reader, contentType string) (*Answer, error) {
	hr, err := c.newRequest(ctx, base, body, contentType)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Accept", ContentType)
	resp, err := c.run().Do(hr)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil {
			return nil, transportError(ctx, err)
		}
		return nil, decodeError(resp, data)
	}
	a := &Answer{RequestID: resp.Header.Get("X-Request-Id"), Finished: resp.Header.Get(HeaderFinished) == "true",
		Output: engine.Kind(resp.Header.Get(HeaderOutput)), Body: resp.Body}
	stage, err := strconv.Atoi(resp.Header.Get(HeaderStage))
	switch {
	case !IsStream(resp.Header.Get("Content-Type")):
		err = fmt.Errorf("the answer is %q, not a stream (%s): is %s an omnistage stage server of this release?", resp.Header.Get("Content-Type"), ContentType, base)
	case err != nil || stage < 0:
		err = fmt.Errorf("the answer's %s header is %q, not a stage id", HeaderStage, resp.Header.Get(HeaderStage))
	case a.Output != "" && !a.Output.Valid():
		err = fmt.Errorf("the answer's %s header is %q, not a kind", HeaderOutput, a.Output)
	}
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("hop: malformed answer: %w", err)
	}
	a.Stage = stage
	return a, nil
}

func (c *Client) newRequest(ctx context.Context, base string, body io.Reader, contentType string) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, RunURL(base), body)
	if err != nil {
		return nil, fmt.Errorf("hop: %w", err)
	}
	hr.Header.Set("Content-Type", contentType)
	if c.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	return hr, nil
}

// Probe sends GET base+path (a stage server's /health or /ready) and
// returns nil when the answer is 200, an *HTTPError for another status, or
// a *TransportError when no answer came.
func (c *Client) Probe(ctx context.Context, base, path string) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("hop: %w", err)
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
		return fmt.Errorf("hop: %w", ctx.Err())
	}
	return &TransportError{Err: err}
}

// AnswerError types an error reading an answer's stream: an error frame
// becomes an *HTTPError, as if the server had answered with its status; a
// stream that is not what it should be stays a *payload.Error; a stream
// cut short, or a failed read, is a *TransportError (the connection broke).
func AnswerError(err error) error {
	var se *payload.StreamError
	if errors.As(err, &se) {
		return &HTTPError{Status: se.Status, Code: se.Code, Message: se.Message}
	}
	var pe *payload.Error
	if errors.As(err, &pe) && pe.Code != payload.CodeTruncated {
		return err
	}
	return &TransportError{Err: err}
}

func decodeError(resp *http.Response, data []byte) *HTTPError {
	e := &HTTPError{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	var body struct {
		Error *apijson.ErrorDetail `json:"error"`
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
// the server's root ("http://host:8101") or already end in Path.
func RunURL(base string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, Path) {
		return base
	}
	return base + Path
}
