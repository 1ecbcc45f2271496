// Package remote is the placement of a stage whose replicas are stage
// servers (omnistage serve --stage N), reached over streamed POST /v1/run
// calls (package hop): one replica per address that the stage's endpoint
// URLs resolve to.
//
// # Members
//
// The placement owns its endpoints: it resolves their host names (an IP
// address in a URL is its own one address) and hands the pool one typed
// Member per address, again every resolve_interval (pool.Members): a
// Kubernetes headless Service, or several /etc/hosts lines, is a set of
// replicas. A name with both IPv4 and IPv6 addresses gives its IPv4 ones:
// "localhost" is one server, not two. A replica calls its endpoint URL
// (its Host header and TLS name are the URL's), over connections to its
// address.
//
// # One streamed call per request
//
// A replica's Process makes one call per request through a hop.Caller:
// the stage's input goes to the server as the upstream stage produces it,
// and its output comes back, and goes on downstream, as the server
// produces it. The call is one HTTP/1.1 request whose body and answer
// stream at once (full duplex); both directions are bounded by TCP's flow
// control and the pipeline's own bounded buffers.
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
// closes its connection, and the server stops its stage.
package remote

import (
	"context"
	"fmt"
	"net"

	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/pool"
)

// LookupFunc resolves a host name to addresses, as net.Resolver.LookupHost.
type LookupFunc func(ctx context.Context, host string) ([]string, error)

// Placement builds the replicas of a pipeline's stages with placement
// remote. Its zero fields have defaults.
type Placement struct {
	// Pipeline is the configuration this process serves: its name, digest
	// and route go into every call.
	Pipeline *pipeline.Config
	// Codec signs the input streams and checks the answers; it holds the
	// stage servers' key. Nil means unsigned.
	Codec *payload.Codec
	// TracerProvider, when set, traces the calls.
	TracerProvider trace.TracerProvider
	// LookupHost resolves the endpoints' host names; nil means
	// net.DefaultResolver's.
	LookupHost LookupFunc
}

// Supervise builds a replica of the stage per address of d's endpoints and
// returns the supervisor that keeps them following the endpoints' names
// (it implements the orchestrator's Placement). Each replica calls with
// the API key in d's api_key_file, if any.
func (p *Placement) Supervise(spec engine.Spec, d *pipeline.DeployStage, cfg pool.Config) (*pool.Supervisor, error) {
	lookup := p.LookupHost
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	var apiKey string
	if file := d.Link.APIKeyFile; file != "" {
		var err error
		if apiKey, err = keyfile.Read(file); err != nil {
			return nil, fmt.Errorf("remote: api_key_file: %w", err)
		}
	}
	members := pool.Members[Member]{
		Interval: d.Link.ResolveInterval,
		Resolve: func(ctx context.Context) ([]Member, error) {
			return Resolve(ctx, lookup, d.Endpoints)
		},
		Build: func(m Member, index int) (engine.Engine, error) {
			spec := spec
			spec.Replica = index
			client := &hop.Client{HTTP: httpClientTo(m.Addr), APIKey: apiKey, TracerProvider: p.TracerProvider}
			return New(Config{Stage: spec, Pipeline: p.Pipeline, Endpoint: m.Endpoint, Addr: m.Addr, Client: client, Codec: p.Codec, Link: d.Link})
		},
	}
	return pool.SuperviseMembers(context.Background(), cfg, members)
}
