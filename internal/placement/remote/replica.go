package remote

// One replica: a proxy engine whose Process calls one stage server.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
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
	// Link are the stage's call settings: Timeout, WarmTimeout,
	// HealthInterval and HealthFailures (the deploy entry's keys).
	Link pipeline.Link
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

	engine.Loss
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
	case cfg.Link.HealthFailures < 0:
		return nil, fmt.Errorf("remote: health_failures must be at least 1, got %d", cfg.Link.HealthFailures)
	}
	if cfg.Client == nil {
		cfg.Client = &hop.Client{}
	}
	if cfg.Codec == nil {
		cfg.Codec = payload.NewCodec(nil)
	}
	if cfg.Link.WarmTimeout <= 0 {
		cfg.Link.WarmTimeout = DefaultWarmTimeout
	}
	if cfg.Link.HealthInterval <= 0 {
		cfg.Link.HealthInterval = DefaultHealthInterval
	}
	if cfg.Link.HealthFailures == 0 {
		cfg.Link.HealthFailures = DefaultHealthFailures
	}
	e := &Engine{cfg: cfg, endpoint: strings.TrimRight(cfg.Endpoint, "/")}
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
	if err := e.Loss.Err(); err != nil {
		return fmt.Errorf("remote %s: %w: %w", e.where, engine.ErrReplicaLost, err)
	}
	if e.caller == nil {
		return fmt.Errorf("remote: stage %d is not on the route", e.cfg.Stage.StageID)
	}
	callCtx := ctx
	if e.cfg.Link.Timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, e.cfg.Link.Timeout)
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
	case errors.As(err, &te) && te.Unsent:
		// Nothing reached the server: the runtime moves the request to
		// another replica (engine.ErrUnsent), and takes this one out of
		// service itself; a mark here would fail the request first.
		return fmt.Errorf("remote %s: %w (%w): %v", e.where, engine.ErrReplicaLost, engine.ErrUnsent, err)
	case errors.As(err, &te):
		// Formatted, not wrapped: what broke (a stream cut short is a
		// payload error) must not classify the request's failure, which
		// is the lost replica. The mark names the server too: a request
		// may hear of the loss from it (the pool) before this returns.
		e.Mark(fmt.Errorf("remote %s: %v", e.where, err))
		return fmt.Errorf("remote %s: %w: %v", e.where, engine.ErrReplicaLost, err)
	case errors.Is(err, context.DeadlineExceeded):
		// Not the request's deadline (ctx is alive): the timeout setting's.
		return fmt.Errorf("remote %s: no answer within %s", e.where, e.cfg.Link.Timeout)
	case errors.As(err, &he) && he.Status == 400 && he.Code == "bad_request":
		// The server's engine refused the request's own input or params.
		return &engine.InputError{Reason: he.Message}
	case errors.As(err, &he):
		// The server refused this server's call (a key, a host, a payload
		// of another configuration) or failed: this side's failure.
		return &engine.UpstreamError{Where: "remote " + e.where, Status: he.Status, Code: he.Code, Message: he.Message}
	}
	return fmt.Errorf("remote %s: %w", e.where, err)
}
