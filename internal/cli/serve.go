package cli

// omnistage serve: its flags, and the choice of role (the HTTP API, a
// headless stage server, or the worker process of a stage with placement
// process) made once, from them.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
)

const serveSynopsis = "serve [--config F ...] [--default-model NAME] [--start-partial] [--addr 127.0.0.1:8080] [--stage N [--pipeline NAME]] [--payload-key-file F ...] [--payload-lifetime D] [--insecure] [--api-key-file F] [--shutdown-timeout D] [--max-conns N] [--max-sessions N] [--live-share F] [--cors-origins O] [--allowed-hosts H] [--hop-min-input-rate B] [--hop-input-window D] [--hop-max-duration D] [--wyoming ADDR [--wyoming-insecure] [--wyoming-peers P] [--wyoming-sentence-quiet D]] [--turns=false] [--log-level L]"

// serveFlags are serve's command line, parsed and checked.
type serveFlags struct {
	// worker is set for a worker process of a stage with placement
	// process, started by its parent with --worker first (package
	// placement/process). It is internal, so it is not a flag and -h does
	// not list it.
	worker          bool
	configs         multiFlag
	pipeline        string // a stage server's or worker's pipeline
	defaultModel    string
	startPartial    bool
	addr            string
	stage           int // -1: none
	payloadKeyFiles multiFlag
	payloadLifetime time.Duration
	insecure        bool
	apiKeyFile      string
	shutdownTimeout time.Duration
	maxConns        int
	corsOrigins     []string
	allowedHosts    []string
	logLevel        slog.Level
	turns           bool // share the CPU among requests by playback deadline
	wyoming         wyomingFlags
	live            liveFlags
	hop             hopLimitFlags
}

// parseServeFlags parses serve's arguments. When ok is false the command
// must return status at once (bad flags, or -h printed the usage).
func parseServeFlags(env Env, args []string) (f *serveFlags, status int, ok bool) {
	f = &serveFlags{}
	if len(args) > 0 && args[0] == "--worker" {
		f.worker, args = true, args[1:]
	}
	defaultLevel := "info"
	if f.worker {
		defaultLevel = "warn"
	}
	fs := newFlags(env, "serve", serveSynopsis)
	fs.Var(&f.configs, "config", "pipeline config file (one pipeline per YAML document), or builtin:NAME; repeat it to serve several pipelines, which requests pick by their model (default: every built-in pipeline)")
	fs.StringVar(&f.pipeline, "pipeline", "", "with --stage: the pipeline whose stage to serve, when the configs hold several (default: tts, or the one there is)")
	fs.StringVar(&f.defaultModel, "default-model", "", "the pipeline that requests without a model, or with OpenAI's tts-1, tts-1-hd or gpt-4o-mini-tts, get (default: tts when served, else the first)")
	fs.BoolVar(&f.startPartial, "start-partial", false, "serve the pipelines that start when some fail to (those answer 503, and /ready names them); without it the server exits, unless it serves the built-in pipelines (no --config), some of which need ONNX Runtime and models that may not be installed")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.IntVar(&f.stage, "stage", -1, "serve only this stage's POST /v1/run: a headless stage server")
	fs.Var(&f.payloadKeyFiles, "payload-key-file", "file holding a key that signs /v1/run payloads (AES-GMAC, keys derived by HKDF-SHA256); repeat it for a key ring: the last file's key signs, every file's key is accepted, and SIGHUP reads the files again; default: $"+keyfile.PayloadKeyEnv+", or unsigned")
	fs.DurationVar(&f.payloadLifetime, "payload-lifetime", payload.DefaultLifetime, "refuse /v1/run payloads and streams issued longer ago than this (or more than 30s ahead of this server's clock); 0 = never")
	fs.BoolVar(&f.insecure, "insecure", false, "serve unsigned /v1/run payloads on an address beyond loopback (without it, such a server needs a payload key)")
	fs.StringVar(&f.apiKeyFile, "api-key-file", "", "file holding the API key clients must send as a bearer token (/health and /ready stay open)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", api.DefaultShutdownTimeout, "how long a stop waits for requests in flight before aborting them")
	fs.IntVar(&f.maxConns, "max-conns", api.DefaultMaxConns, "connections open at once; past it, a new one takes the place of the one silent (else idle) the longest, never of one whose request has begun to arrive, and waits while none may go; near it, answers close their connections")
	corsOrigins := fs.String("cors-origins", "", "comma-separated web origins whose pages may call the API from a browser (https://app.example.com), or * for any; the server also answers to their hosts; default none")
	allowedHosts := fs.String("allowed-hosts", "", "comma-separated host names the server answers to besides its addresses, localhost, its host name and --addr's: names (stage-1.example.com), .example.com or *.example.com for a domain's, or * for any; a request naming another host is refused (403 forbidden_host), which keeps rebound DNS names out")
	fs.BoolVar(&f.turns, "turns", true, "share the CPU among the requests of every pipeline by playback deadline: a request that has not spoken yet goes ahead of others' later sentences (false: every unit of work at once)")
	f.live.register(fs)
	f.wyoming.register(fs)
	f.hop.register(fs)
	logLevel := fs.String("log-level", defaultLevel, "log level: debug, info, warn or error")
	pos, status, ok := parse(fs, args)
	if !ok {
		return nil, status, false
	}
	fail := func(format string, args ...any) (*serveFlags, int, bool) {
		fmt.Fprintf(env.Stderr, "omnistage serve: "+format+"\n", args...)
		return nil, ExitUsage, false
	}
	switch {
	case len(pos) > 0:
		return fail("unexpected argument %q", pos[0])
	case f.shutdownTimeout <= 0 || f.maxConns <= 0:
		return fail("--shutdown-timeout and --max-conns must be positive")
	case f.payloadLifetime < 0:
		return fail("--payload-lifetime must not be negative (0 = payloads never expire)")
	}
	if err := f.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail("--log-level: %v", err)
	}
	if err := f.live.check(); err != nil {
		return fail("%v", err)
	}
	if err := f.wyoming.check(f); err != nil {
		return fail("%v", err)
	}
	if _, err := f.hop.limits(); err != nil {
		return fail("%v", err)
	}
	f.corsOrigins = commaList(*corsOrigins)
	f.allowedHosts = commaList(*allowedHosts)
	if host, _, err := net.SplitHostPort(f.addr); err == nil && host != "" && net.ParseIP(host) == nil {
		f.allowedHosts = append(f.allowedHosts, host) // the name it listens on
	}
	return f, 0, true
}

// commaList is the items of a comma-separated flag, spaces trimmed.
func commaList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// apiOptions are the HTTP server's options that come from the flags.
func (f *serveFlags) apiOptions() api.Options {
	hopLimits, _ := f.hop.limits() // checked by parseServeFlags
	return api.Options{ShutdownTimeout: f.shutdownTimeout, MaxConns: f.maxConns, CORSOrigins: f.corsOrigins, AllowedHosts: f.allowedHosts,
		DefaultModel: f.defaultModel, StartPartial: f.startPartial || len(f.configs) == 0, HopLimits: hopLimits,
		SpeechStream: api.SpeechStreamLimits{MaxSessions: f.live.maxSessions}, LiveShare: f.live.share}
}

func serve(ctx context.Context, env Env, args []string) int {
	f, status, ok := parseServeFlags(env, args)
	if !ok {
		return status
	}
	refs := f.configs
	if len(refs) == 0 && (f.stage != -1 || f.worker) {
		refs = multiFlag{"builtin:" + pipeline.DefaultBuiltin}
	}
	cfgs, err := env.loadPipelines(refs)
	if err != nil {
		printConfigError(env.Stderr, err)
		return ExitUsage
	}
	if f.stage != -1 || f.worker {
		// A stage server or a worker serves one pipeline's stage.
		c, err := pickPipeline(cfgs, f.pipeline, "--pipeline")
		if err != nil && f.worker {
			err = fmt.Errorf("%w: has the file changed since the server that started this worker loaded it?", err)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "omnistage serve: %v\n", err)
			return ExitUsage
		}
		cfgs = []*pipeline.Config{c}
	}
	if f.worker {
		return serveWorker(ctx, env, f, cfgs[0])
	}
	return serveServer(ctx, env, f, cfgs)
}

// serveServer serves the HTTP API of cfgs, or, with --stage, a headless
// server of that stage alone.
func serveServer(ctx context.Context, env Env, f *serveFlags, cfgs []*pipeline.Config) int {
	s := serverSpec{role: "server", flags: f, cfgs: cfgs, api: f.apiOptions()}
	if f.stage != -1 {
		if err := cfgs[0].CheckServable(f.stage); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage serve: --stage: %v\n", err)
			return ExitUsage
		}
		// A headless stage server builds and warms only its own stage.
		s.role, s.api.Stage, s.stages = "stage", &f.stage, []int{f.stage}
	}
	var err error
	if s.ring, err = loadRing(f.payloadKeyFiles, env.Getenv); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: --payload-key-file: %v\n", err)
		return ExitUsage
	}
	if s.ring == nil && !f.insecure && !loopbackOnly(f.addr) {
		fmt.Fprint(env.Stderr, unsignedRefusal(f.addr))
		return ExitUsage
	}
	if f.apiKeyFile != "" {
		if s.api.APIKey, err = keyfile.Read(f.apiKeyFile); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage serve: --api-key-file: %v\n", err)
			return ExitUsage
		}
	}
	rt, status := env.startServer(ctx, s)
	if rt == nil {
		return status
	}
	defer rt.close()
	if s.ring == nil {
		rt.log.Warn("/v1/run payloads are not signed: set --payload-key-file or " + keyfile.PayloadKeyEnv + " when stage servers are reachable by others")
	} else {
		rt.log.Info("payload keys", "keys", s.ring.String(), "signing_key", s.ring.Newest().String(), "lifetime", f.payloadLifetime.String())
	}
	// From here on SIGHUP reloads the key files instead of ending the
	// process.
	stopReloads := runKeyReloader(ctx, newKeyReloader(rt.log, f.payloadKeyFiles, rt.codec))
	defer stopReloads()
	wy, err := rt.listenWyoming(f)
	if err != nil {
		rt.shutdown()
		fmt.Fprintf(env.Stderr, "omnistage serve: --wyoming: %v\n", err)
		return ExitFailure
	}
	return wy.run(ctx, env, func(ctx context.Context) int { return rt.run(ctx, env, nil) })
}
