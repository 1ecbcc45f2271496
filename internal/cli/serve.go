package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/engines/worker"
	"github.com/omnistage/omnistage/internal/memtrim"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/telemetry"
)

const serveSynopsis = "serve [--config F] [--addr 127.0.0.1:8080] [--stage N] [--payload-key-file F ...] [--payload-lifetime D] [--insecure] [--api-key-file F] [--shutdown-timeout D] [--max-conns N] [--cors-origins O] [--log-level L]"

// payloadKeyEnv names the environment variable that holds the /v1/run
// payload key when --payload-key-file is not given.
const payloadKeyEnv = worker.PayloadKeyEnv

func serve(ctx context.Context, env Env, args []string) int {
	// A worker process of a stage with placement process (package
	// worker) is started with --worker first. It is internal, so it is not
	// a flag and -h does not list it.
	asWorker := len(args) > 0 && args[0] == "--worker"
	if asWorker {
		args = args[1:]
	}
	defaultLevel := "info"
	if asWorker {
		defaultLevel = "warn"
	}
	fs := newFlags(env, "serve", serveSynopsis)
	config := fs.String("config", "", "pipeline config file, or builtin:NAME (default: the built-in tts pipeline)")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	stage := fs.Int("stage", -1, "serve only this stage's POST /v1/run: a headless stage server")
	var payloadKeyFiles multiFlag
	fs.Var(&payloadKeyFiles, "payload-key-file", "file holding a key that signs /v1/run payloads (AES-GMAC, keys derived by HKDF-SHA256); repeat it for a key ring: the last file's key signs, every file's key is accepted, and SIGHUP reads the files again; default: $"+payloadKeyEnv+", or unsigned")
	payloadLifetime := fs.Duration("payload-lifetime", payload.DefaultLifetime, "refuse /v1/run payloads and streams issued longer ago than this (or more than 30s ahead of this server's clock); 0 = never")
	insecure := fs.Bool("insecure", false, "serve unsigned /v1/run payloads on an address beyond loopback (without it, such a server needs a payload key)")
	apiKeyFile := fs.String("api-key-file", "", "file holding the API key clients must send as a bearer token (/health and /ready stay open)")
	shutdownTimeout := fs.Duration("shutdown-timeout", api.DefaultShutdownTimeout, "how long a stop waits for requests in flight before aborting them")
	maxConns := fs.Int("max-conns", api.DefaultMaxConns, "connections open at once; past it, a new one takes the place of the one idle (or silent) the longest, and waits only while every connection carries a request")
	corsOrigins := fs.String("cors-origins", "", "comma-separated web origins whose pages may call the API from a browser (https://app.example.com), or * for any; a server on a loopback address also answers to their hosts; default none")
	logLevel := fs.String("log-level", defaultLevel, "log level: debug, info, warn or error")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.Stderr, "omnistage serve: unexpected argument %q\n", pos[0])
		return ExitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: --log-level: %v\n", err)
		return ExitUsage
	}
	if *shutdownTimeout <= 0 || *maxConns <= 0 {
		fmt.Fprintln(env.Stderr, "omnistage serve: --shutdown-timeout and --max-conns must be positive")
		return ExitUsage
	}
	if *payloadLifetime < 0 {
		fmt.Fprintln(env.Stderr, "omnistage serve: --payload-lifetime must not be negative (0 = payloads never expire)")
		return ExitUsage
	}
	cfg, err := env.loadConfig(*config)
	if err != nil {
		printConfigError(env.Stderr, err)
		return ExitUsage
	}
	opts := api.Options{ShutdownTimeout: *shutdownTimeout, MaxConns: *maxConns}
	for _, o := range strings.Split(*corsOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			opts.CORSOrigins = append(opts.CORSOrigins, o)
		}
	}
	switch {
	case asWorker:
		if err := worker.ChildConfig(cfg, *stage); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage serve --worker: %v\n", err)
			return ExitUsage
		}
		// A stage the route skips is only warmed and health-checked: its
		// worker serves no /v1/run.
		if cfg.Route.OnRoute(*stage) {
			opts.Stage = stage
		}
	case *stage != -1:
		if err := cfg.CheckServable(*stage); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage serve: --stage: %v\n", err)
			return ExitUsage
		}
		opts.Stage = stage
	}
	ring, err := loadRing(payloadKeyFiles, env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: --payload-key-file: %v\n", err)
		return ExitUsage
	}
	// A worker listens on loopback, with a key its parent chose.
	if ring == nil && !asWorker && !*insecure && !loopbackOnly(*addr) {
		fmt.Fprint(env.Stderr, unsignedRefusal(*addr))
		return ExitUsage
	}
	if asWorker {
		// Only the parent, which chose this key, may call a worker.
		opts.APIKey = worker.ChildAPIKey(env.Getenv)
	}
	if *apiKeyFile != "" {
		if opts.APIKey, err = readKey(*apiKeyFile, nil); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage serve: --api-key-file: %v\n", err)
			return ExitUsage
		}
	}

	role := "server"
	switch {
	case asWorker:
		role = "worker"
	case opts.Stage != nil:
		role = "stage"
	}
	tracing, stopTracing, err := env.startTracing(ctx, "serve", role)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitUsage
	}
	defer stopTracing()
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(env.Stderr, &slog.HandlerOptions{Level: level})))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	codec := payload.NewRingCodec(ring, payload.WithLifetime(*payloadLifetime))
	// Remote stages sign their hops with this server's key; worker
	// processes write their output where this server does.
	orchOpts := env.orchestratorOptions(cfg, codec, tracing.TracerProvider())
	orchOpts.Registerer, orchOpts.Logger = reg, log
	trim, err := memtrim.New(memtrim.Options{Logger: log, Registerer: reg})
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitFailure
	}
	defer trim.Close()
	orchOpts.Idle = trim
	if asWorker {
		orchOpts.Stages = []int{*stage}
	} else if opts.Stage != nil {
		// A headless stage server builds and warms only its own stage.
		orchOpts.Stages = []int{*opts.Stage}
	}
	orch, err := orchestrator.New(cfg, orchOpts)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitFailure
	}
	opts.Logger, opts.Registry = log, reg
	opts.Codec = codec
	opts.TracerProvider = tracing.TracerProvider()
	srv, err := api.New(orch, opts)
	if err != nil {
		_ = orch.Shutdown(context.Background())
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitFailure
	}
	if ring == nil {
		log.Warn("/v1/run payloads are not signed: set --payload-key-file or " + payloadKeyEnv + " when stage servers are reachable by others")
	} else if !asWorker {
		log.Info("payload keys", "keys", ring.String(), "signing_key", ring.Newest().String(), "lifetime", payloadLifetime.String())
	}
	if !asWorker {
		// From here on SIGHUP reloads the key files instead of ending the
		// process.
		reloader := newKeyReloader(log, payloadKeyFiles, codec)
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { reloader.Run(rctx) })
		defer wg.Wait()
		defer stop()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		_ = orch.Shutdown(context.Background())
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitFailure
	}
	if asWorker {
		var cancel context.CancelFunc
		ctx, cancel = worker.WatchParent(ctx, env.Stdin)
		defer cancel()
		if err := worker.Announce(env.Stdout, ln.Addr(), cfg); err != nil {
			_ = ln.Close()
			_ = orch.Shutdown(context.Background())
			fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
			return ExitFailure
		}
	}
	if err := srv.Run(ctx, ln); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
		return ExitFailure
	}
	return ExitOK
}

// minKeyLen is the shortest key accepted: payload keys and bearer tokens
// shorter than this are guessable.
const minKeyLen = 16

// readKey reads a key from file, or, when file is "" and getenv is set,
// from the payload key variable. Surrounding white space is dropped.
func readKey(file string, getenv func(string) string) (string, error) {
	var key string
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		key = strings.TrimSpace(string(b))
		if key == "" {
			return "", fmt.Errorf("%s is empty", file)
		}
	case getenv != nil:
		key = strings.TrimSpace(getenv(payloadKeyEnv))
		if key == "" {
			return "", nil
		}
	default:
		return "", errors.New("no key file")
	}
	if len(key) < minKeyLen {
		if file != "" {
			return "", fmt.Errorf("%s: the key is %d bytes long; use at least %d (e.g. head -c 32 /dev/urandom | base64 > %s)", file, len(key), minKeyLen, file)
		}
		return "", fmt.Errorf("the key is %d bytes long; use at least %d (e.g. head -c 32 /dev/urandom | base64)", len(key), minKeyLen)
	}
	return key, nil
}
