package cli

// The worker process of a stage with placement process (serve --worker):
// the child side of package placement/process's protocol.

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/process"
)

// serveWorker serves the one replica of stage --stage that the parent
// started this process for, on a loopback port it announces, with the
// keys the parent chose, until the parent stops it or dies.
func serveWorker(ctx context.Context, env Env, f *serveFlags, cfg *pipeline.Config) int {
	if err := process.ChildConfig(cfg, f.stage); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve --worker: %v\n", err)
		return ExitUsage
	}
	s := serverSpec{role: "worker", flags: f, cfgs: []*pipeline.Config{cfg}, api: f.apiOptions(), stages: []int{f.stage}}
	// A stage the route skips is only warmed and health-checked: its
	// worker serves no /v1/run.
	if cfg.Route.OnRoute(f.stage) {
		s.api.Stage = &f.stage
	}
	// Only the parent, which chose these keys, may call its worker or sign
	// payloads for it.
	s.api.APIKey = process.ChildAPIKey(env.Getenv)
	var err error
	if s.ring, err = loadRing(nil, env.Getenv); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve --worker: %v\n", err)
		return ExitUsage
	}
	rt, status := env.startServer(ctx, s)
	if rt == nil {
		return status
	}
	defer rt.close()
	ctx, cancel := process.WatchParent(ctx, env.Stdin)
	defer cancel()
	return rt.run(ctx, env, func(ln net.Listener, out io.Writer) error {
		return process.Announce(out, ln.Addr(), cfg)
	})
}
