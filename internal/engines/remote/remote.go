// Package remote is the placement of a stage whose replicas run elsewhere:
// each replica is one headless stage server (omnistage serve --stage N),
// reached over streamed POST /v1/run calls (package hop).
//
// # One streamed call per request
//
// Process makes one call per request through a hop.Caller: the stage's
// input goes to the server as the upstream stage produces it, and its
// output comes back, and goes on downstream, as the server produces it.
// Both directions are bounded: the call's streams push back on the
// engines at their ends (HTTP/2 flow control and the pipeline's own
// bounded buffers).
//
// # Losing a replica
//
// Warm waits for the server's /ready, then the replica checks /health every
// health_interval. It is lost (Lost closes, for good) after health_failures
// failed checks in a row, or when a call breaks off (refused connection,
// connection dropped mid-stream): Process then returns an error wrapping
// engine.ErrReplicaLost. Answers with an error status, or streams ended by
// an error frame, do not lose the replica: a 4xx that blames the request's
// input becomes an *engine.InputError, anything else a plain error naming
// the server. Cancelling a call (an abort, the client gone, a shutdown)
// ends the call's HTTP/2 stream, and the server stops its stage.
package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// Config is one replica's configuration.
type Config struct {
	// Stage is the replica's stage (id, name, kinds) and index.
	Stage engine.Spec
	// Pipeline is the configuration this process serves: its name, digest
	// and route go into every call.
	Pipeline *pipeline.Config
	// Endpoint is the stage server's base URL.
	Endpoint string
	// Addr, when set, is the host:port the replica connects to instead of
	// the endpoint's host (one of the addresses its name resolves to); the
	// calls still name the endpoint's host (Host header, TLS name).
	Addr string
	// Client makes the calls and the health checks.
	Client *hop.Client
	// Codec signs the input streams and checks the answers; it holds the
	// stage servers' key.
	Codec *payload.Codec
	// Hop are the stage's call settings: Timeout, WarmTimeout,
	// HealthInterval and HealthFailures (the deploy entry's keys).
	Hop pipeline.Hop
}

// Placement returns the builder of the replicas of cfg's stages with
// placement remote (orchestrator.Options.Remote): each calls its endpoint
// with codec, and with the API key in the stage's api_key_file, if any;
// tp traces the calls (nil: none).
func Placement(cfg *pipeline.Config, codec *payload.Codec, tp trace.TracerProvider) orchestrator.RemoteFunc {
	return func(spec engine.Spec, d *pipeline.DeployStage, endpoint, addr string) (engine.Engine, error) {
		client := &hop.Client{HTTP: httpClientTo(addr), TracerProvider: tp}
		if file := d.Hop.APIKeyFile; file != "" {
			key, err := readKey(file)
			if err != nil {
				return nil, fmt.Errorf("remote: api_key_file: %w", err)
			}
			client.APIKey = key
		}
		return New(Config{Stage: spec, Pipeline: cfg, Endpoint: endpoint, Addr: addr, Client: client, Codec: codec, Hop: d.Hop})
	}
}

// httpClientTo returns a hop HTTP client whose connections all go to addr
// (host:port), whatever host a URL names; with addr empty, to the URL's.
func httpClientTo(addr string) *http.Client {
	c := hop.NewHTTPClient()
	if addr == "" {
		return c
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return c
}

// Engine is one replica: one stage server.
type Engine struct {
	cfg      Config
	endpoint string
	where    string      // the endpoint, and the address when it has one, for messages
	caller   *hop.Caller // nil for a stage the route skips

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	watch  sync.Once
	wg     sync.WaitGroup

	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error // written before lost closes
}

var (
	_ engine.Engine       = (*Engine)(nil)
	_ engine.Watcher      = (*Engine)(nil)
	_ engine.LostReasoner = (*Engine)(nil)
)

// Defaults of Config.Hop's zero fields.
const (
	DefaultWarmTimeout    = pipeline.DefaultWarmTimeout
	DefaultHealthInterval = pipeline.DefaultHealthInterval
	DefaultHealthFailures = pipeline.DefaultHealthFailures
)

// New builds a replica. It checks cfg and starts nothing: Warm does.
func New(cfg Config) (*Engine, error) {
	u, err := url.Parse(cfg.Endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("remote: endpoint %q is not an http:// or https:// URL", cfg.Endpoint)
	case cfg.Pipeline == nil || cfg.Pipeline.Route == nil:
		return nil, errors.New("remote: no pipeline with a resolved route")
	case cfg.Hop.HealthFailures < 0:
		return nil, fmt.Errorf("remote: health_failures must be at least 1, got %d", cfg.Hop.HealthFailures)
	}
	if cfg.Client == nil {
		cfg.Client = &hop.Client{}
	}
	if cfg.Codec == nil {
		cfg.Codec = payload.NewCodec(nil)
	}
	if cfg.Hop.WarmTimeout <= 0 {
		cfg.Hop.WarmTimeout = DefaultWarmTimeout
	}
	if cfg.Hop.HealthInterval <= 0 {
		cfg.Hop.HealthInterval = DefaultHealthInterval
	}
	if cfg.Hop.HealthFailures == 0 {
		cfg.Hop.HealthFailures = DefaultHealthFailures
	}
	e := &Engine{cfg: cfg, endpoint: strings.TrimRight(cfg.Endpoint, "/"), lost: make(chan struct{})}
	e.where = e.endpoint
	if cfg.Addr != "" && cfg.Addr != u.Host {
		e.where += " (" + cfg.Addr + ")"
	}
	if cfg.Pipeline.Route.OnRoute(cfg.Stage.StageID) {
		// A skipped stage is initialized and checked, never called.
		if e.caller, err = hop.NewCaller(cfg.Pipeline, cfg.Stage.StageID, cfg.Client, cfg.Codec); err != nil {
			return nil, fmt.Errorf("remote: %w", err)
		}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Endpoint returns the stage server's base URL.
func (e *Engine) Endpoint() string { return e.endpoint }

// Warm waits until the stage server's /ready answers 200, for at most the
// warm timeout, then starts the replica's health checks.
func (e *Engine) Warm(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, e.cfg.Hop.WarmTimeout)
	defer cancel()
	pause := 20 * time.Millisecond
	for {
		// Each check has its own bound: a host cut off (its packets dropped,
		// not refused) must not hold the next check, once it is back.
		pctx, pcancel := context.WithTimeout(ctx, e.probeTimeout())
		err := e.cfg.Client.Probe(pctx, e.endpoint, "/ready")
		pcancel()
		if err == nil {
			break
		}
		var he *hop.HTTPError
		if errors.As(err, &he) && !he.Temporary() {
			return fmt.Errorf("remote: %s: /ready: %w (is it an omnistage stage server?)", e.where, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if parent.Err() != nil {
				return fmt.Errorf("remote: %s not ready: %w", e.where, parent.Err())
			}
			return fmt.Errorf("remote: %s not ready after %s: %w", e.where, e.cfg.Hop.WarmTimeout, err)
		}
		pause = min(2*pause, time.Second)
	}
	e.watch.Do(func() {
		e.wg.Add(1)
		go e.healthLoop()
	})
	return nil
}

// minProbeTimeout is the least time a health check waits for its answer,
// however short the interval: a loaded host answers /health in far less,
// and a host cut off is found within this plus the interval.
const minProbeTimeout = 500 * time.Millisecond

// probeTimeout bounds one /ready or /health check: the health interval,
// and at least minProbeTimeout.
func (e *Engine) probeTimeout() time.Duration {
	return max(e.cfg.Hop.HealthInterval, minProbeTimeout)
}

// healthLoop checks /health until Close, and loses the replica after too
// many failures in a row.
func (e *Engine) healthLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.Hop.HealthInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.lost:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(e.ctx, e.probeTimeout())
		err := e.cfg.Client.Probe(ctx, e.endpoint, "/health")
		cancel()
		if e.ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		if failures++; failures >= e.cfg.Hop.HealthFailures {
			e.markLost(fmt.Errorf("%d health checks of %s failed in a row, the last: %w", failures, e.where, err))
			return
		}
	}
}

func (e *Engine) markLost(cause error) {
	e.lostOnce.Do(func() {
		e.lostErr = cause
		close(e.lost)
	})
}

// Lost implements engine.Watcher.
func (e *Engine) Lost() <-chan struct{} { return e.lost }

// LostErr implements engine.LostReasoner.
func (e *Engine) LostErr() error {
	<-e.lost
	return e.lostErr
}

// Close stops the health checks and closes the replica's idle
// connections. The runtime calls it after the last Process has returned.
func (e *Engine) Close() error {
	e.cancel()
	e.wg.Wait()
	e.cfg.Client.CloseIdleConnections()
	return nil
}

// Process implements engine.Engine: one streamed call to the stage server.
func (e *Engine) Process(ctx context.Context, job *engine.Job) error {
	select {
	case <-e.lost:
		return fmt.Errorf("remote %s: %w: %w", e.where, engine.ErrReplicaLost, e.lostErr)
	default:
	}
	if e.caller == nil {
		return fmt.Errorf("remote: stage %d is not on the route", e.cfg.Stage.StageID)
	}
	callCtx := ctx
	if e.cfg.Hop.Timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, e.cfg.Hop.Timeout)
		defer cancel()
	}
	err := e.caller.Call(callCtx, e.endpoint, job)
	if err == nil {
		return nil
	}
	return e.callError(ctx, err)
}

// callError turns a failed call into the engine's error.
func (e *Engine) callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var (
		te *hop.TransportError
		he *hop.HTTPError
		ie *engine.InputError
	)
	switch {
	case errors.As(err, &ie):
		return err
	case errors.As(err, &te):
		// Formatted, not wrapped: what broke (a stream cut short is a
		// payload error) must not classify the request's failure, which
		// is the lost replica.
		e.markLost(err)
		return fmt.Errorf("remote %s: %w: %v", e.where, engine.ErrReplicaLost, err)
	case errors.Is(err, context.DeadlineExceeded):
		// Not the request's deadline (ctx is alive): the timeout setting's.
		return fmt.Errorf("remote %s: no answer within %s", e.where, e.cfg.Hop.Timeout)
	case errors.As(err, &he) && he.Status == 400 && he.Code == "bad_request":
		// The server's engine refused the request's own input or params.
		return &engine.InputError{Reason: he.Message}
	}
	return fmt.Errorf("remote %s: %w", e.where, err)
}

// readKey reads a key file, dropping surrounding white space.
func readKey(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	return key, nil
}
