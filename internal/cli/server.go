package cli

// What every role of omnistage serve runs: the orchestrator of its stages
// behind the HTTP API, with its logger, metrics, tracing, payload codec
// and memory trimmer.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/memtrim"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/telemetry"
	"github.com/omnistage/omnistage/internal/turns"
)

// serverSpec is what a role of serve runs.
type serverSpec struct {
	role  string // server, stage or worker: omnistage.role in traces
	flags *serveFlags
	cfgs  []*pipeline.Config // the pipelines; one for a stage server or worker
	api   api.Options        // the flags' options, and the role's Stage and APIKey
	// stages limits the stages built to these (orchestrator.Options.Stages).
	stages []int
	ring   *payload.Ring // nil: unsigned payloads
}

// server is a started serve process: its HTTP server over its
// orchestrators, and what close ends, in reverse order.
type server struct {
	log   *slog.Logger
	reg   *prometheus.Registry // what /metrics serves
	codec *payload.Codec
	orchs []*orchestrator.Orchestrator
	srv   *api.Server
	addr  string
	stops []func()
}

// startServer builds the server of s. On failure it has said why on
// env.Stderr and returns the exit status.
func (env Env) startServer(ctx context.Context, s serverSpec) (*server, int) {
	rt := &server{addr: s.flags.addr}
	failed := func(status int, err error) (*server, int) {
		rt.close()
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return nil, status
	}
	tracing, stopTracing, err := env.startTracing(ctx, "serve", s.role)
	if err != nil {
		return failed(ExitUsage, err)
	}
	rt.stops = append(rt.stops, stopTracing)
	rt.log = slog.New(telemetry.LogHandler(slog.NewJSONHandler(env.Stderr, &slog.HandlerOptions{Level: s.flags.logLevel})))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rt.reg = reg
	rt.codec = payload.NewRingCodec(s.ring, payload.WithLifetime(s.flags.payloadLifetime))
	trim, err := memtrim.New(memtrim.Options{Logger: rt.log, Registerer: reg})
	if err != nil {
		return failed(ExitFailure, err)
	}
	rt.stops = append(rt.stops, func() { trim.Close() })
	// The pipelines share the ids of their requests (unique across the
	// server) and the memory trimmer; each has its own stages, limits,
	// metrics (labelled with its name) and log lines.
	requests := orchestrator.NewRequests()
	// They share the CPU too: one scheduler gives the units of work of
	// every pipeline their turns.
	var sched *turns.Scheduler
	if s.flags.turns {
		sched = turns.NewDefault()
	}
	for _, cfg := range s.cfgs {
		// Remote stages sign their hops with this server's key; worker
		// processes write their output where this server does.
		orchOpts := env.orchestratorOptions(cfg, rt.codec, tracing.TracerProvider(), sched)
		orchOpts.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": cfg.Pipeline.Name}, reg)
		orchOpts.Logger = rt.log.With("pipeline", cfg.Pipeline.Name)
		orchOpts.Idle, orchOpts.Stages, orchOpts.Requests = trim, s.stages, requests
		o, err := orchestrator.New(cfg, orchOpts)
		if err != nil {
			rt.shutdown()
			return failed(ExitFailure, fmt.Errorf("pipeline %s: %w", cfg.Pipeline.Name, err))
		}
		rt.orchs = append(rt.orchs, o)
	}
	opts := s.api
	opts.Logger, opts.Registry, opts.Codec, opts.TracerProvider = rt.log, reg, rt.codec, tracing.TracerProvider()
	opts.RunMemoryIdle = trim // refused /v1/run bodies leave memory to trim too
	if rt.srv, err = api.New(rt.orchs, opts); err != nil {
		rt.shutdown()
		return failed(ExitFailure, err)
	}
	return rt, ExitOK
}

// shutdown shuts down the orchestrators built, before the server runs.
func (rt *server) shutdown() {
	for _, o := range rt.orchs {
		_ = o.Shutdown(context.Background())
	}
}

// run listens, calls listening (when set) with the listener and env's
// stdout, then serves until ctx ends and the server has drained.
func (rt *server) run(ctx context.Context, env Env, listening func(net.Listener, io.Writer) error) int {
	fail := func(err error) int {
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitFailure
	}
	ln, err := net.Listen("tcp", rt.addr)
	if err != nil {
		rt.shutdown()
		return fail(err)
	}
	if listening != nil {
		if err := listening(ln, env.Stdout); err != nil {
			_ = ln.Close()
			rt.shutdown()
			return fail(err)
		}
	}
	if err := rt.srv.Run(ctx, ln); err != nil {
		return fail(err)
	}
	return ExitOK
}

// close ends what startServer started, last first.
func (rt *server) close() {
	for i := len(rt.stops) - 1; i >= 0; i-- {
		rt.stops[i]()
	}
	rt.stops = nil
}

// runKeyReloader runs k until the returned stop is called, which waits for
// it to end.
func runKeyReloader(ctx context.Context, k *keyReloader) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { k.Run(rctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}
