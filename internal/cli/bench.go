package cli

// The bench command: load a server or an in-process pipeline with speech
// requests and report what it did.

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/omnistage/omnistage/internal/turns"
)

const benchSynopsis = "bench (--url URL | --config F [--turns=false]) [--timestamps] [-n N | --duration D] [-c C | --rate R] [--abort-ratio X] [--abort-mode M] [--reuse-ids K] [--texts F] [--json] [...]"

const benchHelp = `Loads a running server (--url) or a pipeline built in this process
(--config F or builtin:NAME) with speech requests, then reports throughput,
latency and time-to-first-audio percentiles, the real-time factor, errors
by code, and a leak check. Over HTTP each request is POST /v1/audio/speech
with response_format pcm and stream_format audio, so the first body byte is
the first audio; in process it is the same request given to the
orchestrator, whose requests take turns on the CPU by playback deadline as
serve's do (--turns=false: every unit of work at once, to compare). With
--timestamps the requests ask for word timestamps too (over HTTP as
stream_format sse, whose events bring the audio and the timestamps), and
the latency counts to the last of them. The texts (--texts: one per
line; else a built-in dozen of varied sentences and paragraphs) are
spoken in turn.

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
  underruns                  {requests, events, stall_ms, max_stall_ms}: the ok
                             and aborted streams that fell behind a listener
                             who plays each from its first audio on, in real
                             time, with no buffer: how many, how often in all,
                             and the silence that made (in all, and the most
                             in one stream)
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
	c, status, ok := parseBench(env, args)
	if !ok {
		return status
	}
	return c.run(ctx, env)
}

// benchCommand is a bench command line, parsed and checked.
type benchCommand struct {
	url        string // the server to load, or ""
	config     string // the pipeline to build in process when url is ""
	model      string
	apiKeyFile string
	asJSON     bool
	turns      bool // in process: share the CPU by playback deadline
	timestamps bool // ask for word timestamps too
	opts       loadgen.Options
}

// benchUsage reports a usage error of bench.
func benchUsage(env Env, format string, a ...any) int {
	fmt.Fprintf(env.Stderr, "omnistage bench: "+format+"\n", a...)
	fmt.Fprintf(env.Stderr, "usage: omnistage %s\n", benchSynopsis)
	return ExitUsage
}

// parseBench parses and checks bench's flags. When ok is false the command
// ends with status.
func parseBench(env Env, args []string) (c *benchCommand, status int, ok bool) {
	fs := newFlags(env, "bench", benchSynopsis)
	base := fs.Usage
	fs.Usage = func() {
		base()
		fmt.Fprint(env.Stderr, "\n", benchHelp)
	}
	c = &benchCommand{}
	o := &c.opts
	fs.StringVar(&c.url, "url", "", "load the server at `URL` (http://HOST:PORT)")
	fs.StringVar(&c.config, "config", "", "load a pipeline built in this process from `F` (a YAML file or builtin:NAME)")
	fs.IntVar(&o.Requests, "n", 0, "send `N` requests (default 100)")
	fs.DurationVar(&o.Duration, "duration", 0, "keep sending requests for `D` instead of -n")
	fs.IntVar(&o.Concurrency, "c", 0, "keep `C` requests in flight (default 1)")
	fs.Float64Var(&o.Rate, "rate", 0, "start `R` requests per second instead of -c")
	fs.Float64Var(&o.AbortRatio, "abort-ratio", 0, "abort this fraction of the requests, 0 to 1")
	abortMode := fs.String("abort-mode", "both", "how to abort: both (half each), delete (DELETE /v1/requests/{id}) or hangup")
	fs.IntVar(&o.ReuseIDs, "reuse-ids", 0, "take request ids from a pool of `K`, each reused once the server let go of it (0: a new id each)")
	textsFile := fs.String("texts", "", "speak the texts of `F`, one per line (default: a built-in set)")
	fs.DurationVar(&o.Timeout, "timeout", loadgen.DefaultTimeout, "give up on one request after this long")
	fs.DurationVar(&o.LeakWait, "leak-wait", loadgen.DefaultLeakWait, "how long the leak check waits for the server to come back to rest")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the choice of requests to abort, and where")
	fs.StringVar(&c.model, "model", "", "the model to request (default: the server's default pipeline); with --config, the pipeline of the file to load, when it holds several")
	fs.StringVar(&c.apiKeyFile, "api-key-file", "", "send the API key in `FILE` as a bearer token")
	fs.BoolVar(&c.asJSON, "json", false, "print the report as one JSON object")
	fs.BoolVar(&c.turns, "turns", true, "with --config: the pipeline's requests take turns on the CPU by playback deadline, as serve's do (false: every unit of work at once)")
	fs.BoolVar(&c.timestamps, "timestamps", false, "the requests ask for word timestamps too, which the aligner makes beside the audio (over HTTP: stream_format sse)")
	pos, status, ok := parse(fs, args)
	if !ok {
		return nil, status, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.check(pos, set, *abortMode, *textsFile); err != nil {
		return nil, benchUsage(env, "%v", err), false
	}
	return c, ExitOK, true
}

// check checks the parsed flags (set names those given) and completes the
// load's options: their defaults, the abort mode and the texts.
func (c *benchCommand) check(pos []string, set map[string]bool, abortMode, textsFile string) error {
	o := &c.opts
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected argument %q", pos[0])
	case (c.url == "") == (c.config == ""):
		return errors.New("give either --url or --config")
	case set["n"] && set["duration"]:
		return errors.New("give either -n or --duration")
	case set["c"] && set["rate"]:
		return errors.New("give either -c or --rate")
	case c.url == "" && c.apiKeyFile != "":
		return errors.New("--api-key-file goes with --url")
	case c.url != "" && set["turns"]:
		return errors.New("--turns goes with --config: a server takes turns as its serve --turns says")
	}
	if !set["n"] && !set["duration"] {
		o.Requests = 100
	}
	if !set["c"] && !set["rate"] {
		o.Concurrency = 1
	}
	var err error
	if o.AbortMode, err = loadgen.ParseAbortMode(abortMode); err != nil {
		return fmt.Errorf("--abort-mode: %w", err)
	}
	if textsFile != "" {
		if o.Texts, err = readTexts(textsFile); err != nil {
			return fmt.Errorf("--texts: %w", err)
		}
	}
	if o.Timeout <= 0 || o.LeakWait <= 0 {
		return errors.New("--timeout and --leak-wait must be positive")
	}
	return o.Check()
}

// run loads the target and reports.
func (c *benchCommand) run(ctx context.Context, env Env) int {
	driver, target, stop, status := c.driver(ctx, env)
	if driver == nil {
		return status
	}
	defer stop()
	fmt.Fprintf(env.Stderr, "omnistage bench: %s to %s\n", describeLoad(c.opts), target)
	opts := c.opts
	bar := newProgress(env.Stderr, opts)
	if bar != nil {
		opts.OnResult = func(loadgen.Result) { _ = bar.Add(1) }
	}
	rep, err := loadgen.Run(ctx, driver, opts)
	if bar != nil {
		_ = bar.Finish()
	}
	if err == nil {
		err = c.print(env.Stdout, rep)
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

// driver returns the driver of the run's target, what to call it, and the
// function that releases it; on failure a nil driver and the exit status.
func (c *benchCommand) driver(ctx context.Context, env Env) (loadgen.Driver, string, func(), int) {
	if c.url == "" {
		o, stop, status := env.benchOrchestrator(ctx, c)
		if o == nil {
			return nil, "", nil, status
		}
		return loadgen.NewInProcess(o, c.timestamps), fmt.Sprintf("pipeline %s in process", o.Config().Pipeline.Name), stop, ExitOK
	}
	var apiKey string
	if c.apiKeyFile != "" {
		var err error
		if apiKey, err = keyfile.Read(c.apiKeyFile); err != nil {
			return nil, "", nil, benchUsage(env, "--api-key-file: %v", err)
		}
	}
	o := c.opts
	d, err := loadgen.NewHTTP(c.url, loadgen.HTTPOptions{APIKey: apiKey, Model: c.model, Conns: max(o.Concurrency, min(int(o.Rate)+1, 64)), Timestamps: c.timestamps})
	if err != nil {
		return nil, "", nil, benchUsage(env, "%v", err)
	}
	if err := d.Prepare(ctx, time.Minute); err != nil {
		d.Close()
		fmt.Fprintf(env.Stderr, "omnistage bench: %v\n", err)
		return nil, "", nil, ExitFailure
	}
	return d, fmt.Sprintf("%s (model %s)", c.url, d.Model()), d.Close, ExitOK
}

// print writes the report, as JSON with --json.
func (c *benchCommand) print(w io.Writer, rep *loadgen.Report) error {
	if !c.asJSON {
		return rep.WriteText(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// benchOrchestrator builds and starts the orchestrator of c's --config
// for an in-process run, as say does, with the payload key serve would use
// and, with --turns, turns on the CPU as serve shares it. On failure it
// returns a nil orchestrator and the exit status; else a function that
// shuts it down.
func (env Env) benchOrchestrator(ctx context.Context, c *benchCommand) (*orchestrator.Orchestrator, func(), int) {
	cfgs, err := env.loadPipelines([]string{c.config})
	if err != nil {
		printConfigError(env.Stderr, err)
		return nil, nil, ExitUsage
	}
	cfg, err := pickPipeline(cfgs, c.model, "--model")
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage bench: %v\n", err)
		return nil, nil, ExitUsage
	}
	if c.timestamps && cfg.Pipeline.Aligner == nil {
		return nil, nil, benchUsage(env, "--timestamps: pipeline %s has no aligner", cfg.Pipeline.Name)
	}
	key, err := keyfile.FromEnv(env.Getenv, keyfile.PayloadKeyEnv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage bench: $%s: %v\n", keyfile.PayloadKeyEnv, err)
		return nil, nil, ExitUsage
	}
	var sched *turns.Scheduler
	if c.turns {
		sched = turns.NewDefault()
	}
	o, stop, err := env.startLocal(ctx, "bench", cfg, payload.NewCodec([]byte(key)), slog.LevelWarn, sched, nil)
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
