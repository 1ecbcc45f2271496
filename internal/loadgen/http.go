package loadgen

// The HTTP driver: speech requests to a running server.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
)

// maxSmallBody caps what is read of an error answer, /v1/models or a
// request's state.
const maxSmallBody = 64 << 10

// readBuffer is the size of one read of a speech stream.
const readBuffer = 32 << 10

// HTTPOptions configure an HTTP driver.
type HTTPOptions struct {
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Model is the model requests name; "" means the server's default
	// pipeline (defaultModel).
	Model string
	// Conns is the number of idle connections kept open for reuse: the
	// run's concurrency.
	Conns int
	// Timestamps makes the requests ask for word timestamps too, which
	// come with the audio as server-sent events (stream_format sse).
	Timestamps bool
}

// HTTP drives a running omnistage server.
type HTTP struct {
	base   string
	opts   HTTPOptions
	client *http.Client
}

var _ Driver = (*HTTP)(nil)

// NewHTTP returns a driver for the server at base, an http:// or https://
// URL without a path. Call Prepare before the run and Close after.
func NewHTTP(base string, opts HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("loadgen: server URL %q: want http://HOST:PORT or https://HOST:PORT", base)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(opts.Conns, 2)
	tr.DisableCompression = true
	return &HTTP{base: strings.TrimRight(base, "/"), opts: opts, client: &http.Client{Transport: tr}}, nil
}

// unreachableWait bounds how long Prepare retries a server that does not
// answer at all (one starting up, not listening yet).
const unreachableWait = 5 * time.Second

// Prepare waits up to wait for the server's /ready (up to
// unreachableWait while it does not answer at all), then picks the model
// when none was given.
func (d *HTTP) Prepare(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for {
		status, body, err := d.do(ctx, http.MethodGet, "/ready")
		if err == nil && status == http.StatusOK {
			break
		}
		if err == nil && status != http.StatusServiceUnavailable {
			return fmt.Errorf("loadgen: GET %s/ready: %w", d.base, errorOf(status, body))
		}
		if err != nil && time.Since(start) >= unreachableWait {
			return fmt.Errorf("loadgen: %s does not answer: %w", d.base, err)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errorOf(status, body)
			}
			return fmt.Errorf("loadgen: %s not ready after %s: %w", d.base, wait, err)
		case <-tick.C:
		}
	}
	if d.opts.Model != "" {
		return nil
	}
	status, body, err := d.do(ctx, http.MethodGet, "/v1/models")
	if err != nil {
		return fmt.Errorf("loadgen: GET %s/v1/models: %w", d.base, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("loadgen: GET %s/v1/models: %w", d.base, errorOf(status, body))
	}
	var list apijson.ModelList
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
		return fmt.Errorf("loadgen: GET %s/v1/models: no model in the answer", d.base)
	}
	if d.opts.Model = defaultModel(list.Data); d.opts.Model == "" {
		return fmt.Errorf("loadgen: %s serves no pipeline that takes text (its models: %s); name one with --model", d.base, modelIDs(list.Data))
	}
	return nil
}

// defaultModel returns the pipeline a speech request without a model of
// its own should name: the one the server's model aliases stand for
// (OpenAI's tts-1 and the others: its default pipeline, serve
// --default-model), else the first that takes text; "" when none does.
// (The first model listed may be an image pipeline: the built-ins are
// listed by name.)
func defaultModel(models []apijson.Model) string {
	takesText := func(m apijson.Model) bool { return m.AliasOf == "" && (m.Input == "" || m.Input == "text") }
	for _, alias := range models {
		if alias.AliasOf == "" {
			continue
		}
		for _, m := range models {
			if m.ID == alias.AliasOf && takesText(m) {
				return m.ID
			}
		}
	}
	for _, m := range models {
		if takesText(m) {
			return m.ID
		}
	}
	return ""
}

// modelIDs lists the ids of models, for an error.
func modelIDs(models []apijson.Model) string {
	ids := make([]string, len(models))
	for i, m := range models {
		ids[i] = m.ID
	}
	return strings.Join(ids, ", ")
}

// Model returns the model requests name.
func (d *HTTP) Model() string { return d.opts.Model }

// Close closes the driver's idle connections.
func (d *HTTP) Close() { d.client.CloseIdleConnections() }

// Start implements Driver: POST /v1/audio/speech, streamed raw PCM, or
// server-sent events of it and its word timestamps.
func (d *HTTP) Start(ctx context.Context, id, text string) (Stream, error) {
	stream := "audio"
	if d.opts.Timestamps {
		stream = "sse"
	}
	body, err := json.Marshal(apijson.SpeechRequest{Model: d.opts.Model, Input: text, ResponseFormat: "pcm", StreamFormat: stream})
	if err != nil {
		return nil, err
	}
	req, err := d.request(ctx, http.MethodPost, "/v1/audio/speech", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	if d.opts.Timestamps {
		req.Header.Set("X-Word-Timestamps", "true")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxSmallBody))
		return nil, errorOf(resp.StatusCode, data)
	}
	rate, err := strconv.Atoi(resp.Header.Get("X-Sample-Rate"))
	if err != nil || rate <= 0 {
		resp.Body.Close()
		return nil, &Error{Code: CodeBadResponse, Msg: fmt.Sprintf("X-Sample-Rate is %q; want a positive number", resp.Header.Get("X-Sample-Rate"))}
	}
	if d.opts.Timestamps {
		return newEventStream(resp, rate), nil
	}
	return &httpStream{resp: resp, rate: rate, buf: make([]byte, readBuffer)}, nil
}

// httpStream reads a speech answer's body.
type httpStream struct {
	resp *http.Response
	rate int
	buf  []byte
	half int   // 1 when the last read ended in the middle of a sample
	err  error // the end the last read saw along with data, returned next
}

// Next implements Stream. A read that brings data and the end together
// returns the data first, so that the caller sees the audio before the end.
func (s *httpStream) Next(ctx context.Context) (int, int, error) {
	if s.err != nil {
		return 0, 0, s.err
	}
	for {
		n, err := s.resp.Body.Read(s.buf)
		if errors.Is(err, io.EOF) {
			err = s.end()
		}
		if n > 0 {
			n += s.half
			s.half = n % 2
			s.err = err
			return n / 2, s.rate, nil
		}
		if err != nil {
			s.err = err
			return 0, 0, err
		}
	}
}

// end is the error a complete body ends with: io.EOF, or the failure the
// X-Stream-Error trailer names ("code: message").
func (s *httpStream) end() error {
	msg := s.resp.Trailer.Get("X-Stream-Error")
	if msg == "" {
		return io.EOF
	}
	code, text, _ := strings.Cut(msg, ": ")
	return &Error{Code: code, Msg: text}
}

// Close implements Stream.
func (s *httpStream) Close() { s.resp.Body.Close() }

// Abort implements Driver: DELETE /v1/requests/{id}.
func (d *HTTP) Abort(ctx context.Context, id string) error {
	status, body, err := d.do(ctx, http.MethodDelete, "/v1/requests/"+url.PathEscape(id))
	switch {
	case err != nil:
		return err
	case status == http.StatusOK:
		return nil
	case status == http.StatusNotFound:
		return ErrNotFound
	}
	return errorOf(status, body)
}

// Held implements Driver: GET /v1/requests/{id}.
func (d *HTTP) Held(ctx context.Context, id string) (bool, error) {
	status, body, err := d.do(ctx, http.MethodGet, "/v1/requests/"+url.PathEscape(id))
	switch {
	case err != nil:
		return false, err
	case status == http.StatusOK:
		return true, nil
	case status == http.StatusNotFound:
		return false, nil
	}
	return false, errorOf(status, body)
}

// maxMetricsBody caps a /metrics answer.
const maxMetricsBody = 16 << 20

// Leaks implements Driver: it reads the server's /metrics.
func (d *HTTP) Leaks(ctx context.Context) (Leaks, error) {
	req, err := d.request(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return Leaks{}, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return Leaks{}, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxSmallBody))
		return Leaks{}, fmt.Errorf("GET /metrics: %w", errorOf(resp.StatusCode, data))
	}
	l, err := ParseMetrics(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return Leaks{}, fmt.Errorf("GET /metrics: %w", err)
	}
	return l, nil
}

func (d *HTTP) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, body)
	if err != nil {
		return nil, err
	}
	if d.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.opts.APIKey)
	}
	return req, nil
}

// do sends a request without a body and returns the status and the
// (small) body of its answer.
func (d *HTTP) do(ctx context.Context, method, path string) (int, []byte, error) {
	req, err := d.request(ctx, method, path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSmallBody))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

// errorOf is the error of an answer with a status other than 200: the
// code of its JSON error, or http_STATUS.
func errorOf(status int, body []byte) *Error {
	var e apijson.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return &Error{Code: e.Error.Code, Msg: e.Error.Message}
	}
	return &Error{Code: "http_" + strconv.Itoa(status), Msg: strings.TrimSpace(string(body[:min(len(body), 512)]))}
}
