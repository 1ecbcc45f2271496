package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/loadgen"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
)

const benchSynopsis = "bench (--url URL | --config F) [-n N | --duration D] [-c C | --rate R] [--abort-ratio X] [--abort-mode M] [--reuse-ids K] [--texts F] [--json] [...]"

const benchHelp = `Loads a running server (--url) or a pipeline built in this process
(--config F or builtin:NAME) with speech requests, then reports throughput,
latency and time-to-first-audio percentiles, the real-time factor, errors
by code, and a leak check. Over HTTP each request is POST /v1/audio/speech
with response_format pcm and stream_format audio, so the first body byte is
the first audio; in process it is the same request given to the
orchestrator. The texts (--texts: one per line; else a built-in dozen of
varied sentences and paragraphs) are spoken in turn.

Arrivals: -c C keeps C requests in flight (default 1); --rate R starts R
requests per second whatever the server does, at most 1024 in flight, with
latency counted from when a request was due. The run sends -n N requests
(default 100) or keeps sending for --duration D, then waits for those in
flight.

--abort-ratio X aborts that fraction of the requests at a random point of
their stream: once a random fraction of the audio the same text gave when
it last ran to its end has come (before that, of the audio its length
should give at the audio per character seen so far; before any request
ended, at its first audio). Half are aborted by DELETE /v1/requests/{id},
half by hanging up (--abort-mode picks one); the choices come from --seed.
Aborted requests count as aborted, not as errors. --reuse-ids K takes the request
ids from a pool of K, each reused once the server has let go of it.

After the load, the leak check reads the server's /metrics (in process,
the orchestrator's own counts) until omnistage_requests_inflight and every
stage's omnistage_stage_bindings are back to 0, for at most --leak-wait.

A progress bar goes to standard error while the run lasts, when standard
error is a terminal (with --json too: the object goes to standard output).

--json prints one JSON object:
  requests                   requests sent: ok + aborted + the errors' counts
  ok                         requests whose stream ended cleanly with audio
  aborted                    requests aborted as --abort-ratio asked
  errors                     failed requests by code: the server's error code
                             (overloaded, replica_lost, conflict, ...), http_STATUS
                             without one, timeout (--timeout), transport,
                             bad_response (no X-Sample-Rate, or no audio),
                             interrupted (the run was stopped); {} when none
  rps                        requests per second of duration_s
  audio_seconds_per_second   audio_seconds per second of duration_s
  latency_ms                 {p50, p90, p99, max} of the ok requests' latency
  ttfa_ms                    {p50, p90, p99, max} of the ok and aborted
                             requests' time to first audio
  rtf                        real-time factor: the ok requests' latencies summed
                             over their audio seconds summed (0 if none was ok)
  leaks                      {inflight, bindings, bindings_by_stage, ok, error}:
                             what the server still held when the leak check
                             ended; ok when both came back to 0
  duration_s                 seconds from the first request's start to the
                             last one's end
  audio_seconds              audio received, aborted requests' included
Percentiles are nearest-rank, in milliseconds.

Exit status: 0 when every request ended ok or aborted as asked and the leak
check passed; 1 otherwise; 2 on a usage error.
`

func bench(ctx context.Context, env Env, args []string) int {
	fs := newFlags(env, "bench", benchSynopsis)
	base := fs.Usage
	fs.Usage = func() {
		base()
		fmt.Fprint(env.Stderr, "\n", benchHelp)
	}
	url := fs.String("url", "", "load the server at `URL` (http://HOST:PORT)")
	config := fs.String("config", "", "load a pipeline built in this process from `F` (a YAML file or builtin:NAME)")
	n := fs.Int("n", 0, "send `N` requests (default 100)")
	duration := fs.Duration("duration", 0, "keep sending requests for `D` instead of -n")
	c := fs.Int("c", 0, "keep `C` requests in flight (default 1)")
	rate := fs.Float64("rate", 0, "start `R` requests per second instead of -c")
	abortRatio := fs.Float64("abort-ratio", 0, "abort this fraction of the requests, 0 to 1")
	abortMode := fs.String("abort-mode", "both", "how to abort: both (half each), delete (DELETE /v1/requests/{id}) or hangup")
	reuseIDs := fs.Int("reuse-ids", 0, "take request ids from a pool of `K`, each reused once the server let go of it (0: a new id each)")
	textsFile := fs.String("texts", "", "speak the texts of `F`, one per line (default: a built-in set)")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "give up on one request after this long")
	leakWait := fs.Duration("leak-wait", loadgen.DefaultLeakWait, "how long the leak check waits for the server to come back to rest")
	seed := fs.Uint64("seed", 1, "seed of the choice of requests to abort, and where")
	model := fs.String("model", "", "the model to request (default: the server's pipeline)")
	apiKeyFile := fs.String("api-key-file", "", "send the API key in `FILE` as a bearer token")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "omnistage bench: "+format+"\n", a...)
		fmt.Fprintf(env.Stderr, "usage: omnistage %s\n", benchSynopsis)
		return ExitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case len(pos) > 0:
		return usageErr("unexpected argument %q", pos[0])
	case (*url == "") == (*config == ""):
		return usageErr("give either --url or --config")
	case set["n"] && set["duration"]:
		return usageErr("give either -n or --duration")
	case set["c"] && set["rate"]:
		return usageErr("give either -c or --rate")
	case *url == "" && (*apiKeyFile != "" || *model != ""):
		return usageErr("--api-key-file and --model go with --url")
	}
	opts := loadgen.Options{
		Requests: *n, Duration: *duration, Concurrency: *c, Rate: *rate,
		AbortRatio: *abortRatio, ReuseIDs: *reuseIDs, Timeout: *timeout, LeakWait: *leakWait, Seed: *seed,
	}
	if !set["n"] && !set["duration"] {
		opts.Requests = 100
	}
	if !set["c"] && !set["rate"] {
		opts.Concurrency = 1
	}
	var err error
	if opts.AbortMode, err = loadgen.ParseAbortMode(*abortMode); err != nil {
		return usageErr("--abort-mode: %v", err)
	}
	if *textsFile != "" {
		if opts.Texts, err = readTexts(*textsFile); err != nil {
			return usageErr("--texts: %v", err)
		}
	}
	if *timeout <= 0 || *leakWait <= 0 {
		return usageErr("--timeout and --leak-wait must be positive")
	}
	if err := opts.Check(); err != nil {
		return usageErr("%v", err)
	}

	var driver loadgen.Driver
	var target string
	if *url != "" {
		var apiKey string
		if *apiKeyFile != "" {
			if apiKey, err = keyfile.Read(*apiKeyFile); err != nil {
				return usageErr("--api-key-file: %v", err)
			}
		}
		d, err := loadgen.NewHTTP(*url, loadgen.HTTPOptions{APIKey: apiKey, Model: *model, Conns: max(opts.Concurrency, min(int(opts.Rate)+1, 64))})
		if err != nil {
			return usageErr("%v", err)
		}
		defer d.Close()
		if err := d.Prepare(ctx, time.Minute); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage bench: %v\n", err)
			return ExitFailure
		}
		driver, target = d, fmt.Sprintf("%s (model %s)", *url, d.Model())
	} else {
		o, stop, status := env.benchOrchestrator(ctx, *config)
		if o == nil {
			return status
		}
		defer stop()
		driver, target = loadgen.NewInProcess(o), fmt.Sprintf("pipeline %s in process", o.Config().Pipeline.Name)
	}

	fmt.Fprintf(env.Stderr, "omnistage bench: %s to %s\n", describeLoad(opts), target)
	bar := newProgress(env.Stderr, opts)
	if bar != nil {
		opts.OnResult = func(loadgen.Result) { _ = bar.Add(1) }
	}
	rep, err := loadgen.Run(ctx, driver, opts)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage bench: %v\n", err)
		return ExitFailure
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(env.Stdout)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage bench: %v\n", err)
		return ExitFailure
	}
	if rep.Failed() {
		if !rep.Leaks.OK {
			fmt.Fprintf(env.Stderr, "omnistage bench: the leak check failed: %s: %s\n", rep.Leaks.Error, rep.Leaks)
		}
		if errs := rep.Requests - rep.OK - rep.Aborted; errs > 0 {
			fmt.Fprintf(env.Stderr, "omnistage bench: %d of %d requests failed\n", errs, rep.Requests)
		}
		return ExitFailure
	}
	return ExitOK
}

// benchOrchestrator builds and starts the orchestrator of config for an
// in-process run, as say does, with the payload key serve would use. On
// failure it returns a nil orchestrator and the exit status; else a
// function that shuts it down.
func (env Env) benchOrchestrator(ctx context.Context, config string) (*orchestrator.Orchestrator, func(), int) {
	cfg, err := env.loadConfig(config)
	if err != nil {
		printConfigError(env.Stderr, err)
		return nil, nil, ExitUsage
	}
	key, err := keyfile.FromEnv(env.Getenv, keyfile.PayloadKeyEnv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage bench: $%s: %v\n", keyfile.PayloadKeyEnv, err)
		return nil, nil, ExitUsage
	}
	o, stop, err := env.startLocal(ctx, "bench", cfg, payload.NewCodec([]byte(key)), slog.LevelWarn)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage bench: %v\n", err)
		return nil, nil, ExitFailure
	}
	return o, stop, ExitOK
}

// readTexts reads a texts file.
func readTexts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	texts, err := loadgen.ReadTexts(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return texts, nil
}

// describeLoad says what a run sends, for its first line.
func describeLoad(o loadgen.Options) string {
	var s string
	if o.Requests > 0 {
		s = fmt.Sprintf("%d requests", o.Requests)
	} else {
		s = fmt.Sprintf("requests for %s", o.Duration)
	}
	if o.Rate > 0 {
		s += fmt.Sprintf(" at %g per second", o.Rate)
	} else {
		s += fmt.Sprintf(" at concurrency %d", o.Concurrency)
	}
	if o.AbortRatio > 0 {
		s += fmt.Sprintf(", %g of them aborted (%s)", o.AbortRatio, o.AbortMode)
	}
	if o.ReuseIDs > 0 {
		s += fmt.Sprintf(", ids from a pool of %d", o.ReuseIDs)
	}
	return s
}

// newProgress returns a progress bar of the run's requests on w, or nil
// when w is not a terminal.
func newProgress(w io.Writer, o loadgen.Options) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	total := o.Requests
	if total == 0 {
		total = -1 // a run for a duration: a spinner with a count
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("requests"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionClearOnFinish(),
	)
}
