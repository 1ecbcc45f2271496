package cli

// The run command: drive headless stage servers over streamed /v1/run
// calls and write the audio as it arrives.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/coordinator"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/keyfile"
	"github.com/omnistage/omnistage/internal/telemetry"
)

const runSynopsis = "run --stage URL [--stage URL ...] [-o out.wav] [--timestamps] [--voice V] [--speed S] [--api-key-file F] TEXT"

const runHelp = `Drives headless stage servers (omnistage serve --stage N) over streamed
POST /v1/run calls: posts TEXT to stage 0 and, as each answer starts, pipes
it into a call to the stage the answer names, until the last stage answers.
Every stage runs at once, so the audio reaches -o while later sentences are
still being produced. TEXT '-' reads standard input.

Each --stage gives one stage's servers, as ID=URL[,URL...] or URL[,URL...].
Without ID= a flag names the stage after the previous flag's (the first is
stage 0), so
  --stage http://127.0.0.1:8101 --stage http://127.0.0.1:8102
is stage 0 and stage 1, and
  --stage 0=http://a:8101,http://b:8101 --stage 1=http://c:8102
gives stage 0 two servers: calls start at each in turn, and a call that
fails before its answer's first chunk (no answer, a 5xx, or --hop-timeout of
silence) moves on to the next (calls are stateless, so this is safe). Once
an answer has passed a chunk on, its call is bound to its server: a failure
then ends the run, as a 4xx does at once, with the server's message.

A progress line per call goes to standard error, with the time to the
call's first chunk. The audio is written to -o as a WAV file (out.wav
unless given; '-' writes it to standard output as it arrives, with a
streaming header whose sizes are unknown); --timestamps also requests word
timestamps and prints them as JSON to standard output.

Exit status: 0 on success, 1 when a call fails, 2 on a usage error.
`

func runCoordinator(ctx context.Context, env Env, args []string) int {
	c, status, ok := parseRun(env, args)
	if !ok {
		return status
	}
	return c.run(ctx, env)
}

// runCommand is a run command line, parsed and checked.
type runCommand struct {
	text       string
	stages     map[int][]string // the servers of each stage id
	numIDs     int              // the stage ids the --stage flags span
	out        string           // "-" for standard output
	timestamps bool
	talker     talker.Params
	apiKeyFile string
	requestID  string
	timeout    time.Duration // 0: no limit
	hopTimeout time.Duration
}

// runUsage reports a usage error of run.
func runUsage(env Env, format string, a ...any) int {
	fmt.Fprintf(env.Stderr, "omnistage run: "+format+"\n", a...)
	fmt.Fprintf(env.Stderr, "usage: omnistage %s\n", runSynopsis)
	return ExitUsage
}

// parseRun parses and checks run's flags. When ok is false the command ends
// with status.
func parseRun(env Env, args []string) (c *runCommand, status int, ok bool) {
	fs := newFlags(env, "run", runSynopsis)
	base := fs.Usage
	fs.Usage = func() {
		base()
		fmt.Fprint(env.Stderr, "\n", runHelp)
	}
	c = &runCommand{}
	var stageFlags multiFlag
	fs.Var(&stageFlags, "stage", "a stage's servers: `[ID=]URL[,URL...]`; repeat once per stage (see below)")
	fs.StringVar(&c.out, "o", "out.wav", "write the audio to `FILE` ('-' for standard output)")
	fs.BoolVar(&c.timestamps, "timestamps", false, "also request word timestamps and print them as JSON to standard output")
	voice := fs.String("voice", "", "stage 0's voice (sampling_params[0].voice)")
	speed := fs.Float64("speed", 0, "stage 0's speaking rate, 1 is normal; 0 leaves the server's default (sampling_params[0].speed)")
	fs.StringVar(&c.apiKeyFile, "api-key-file", "", "send the API key in `FILE` as a bearer token")
	fs.StringVar(&c.requestID, "request-id", "", "the request id (default: the server generates one)")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up after this long (0: no limit)")
	fs.DurationVar(&c.hopTimeout, "hop-timeout", coordinator.DefaultAnswerTimeout, "give up on a server whose answer has not begun, or has gone silent, for this long, and try the stage's next server if it has one and nothing of the answer was passed on yet (negative: wait forever)")
	pos, status, ok := parse(fs, args)
	if !ok {
		return nil, status, false
	}
	var err error
	if c.text, err = sayText(pos, env.Stdin); err != nil {
		return nil, runUsage(env, "%v", err), false
	}
	if c.stages, c.numIDs, err = parseStageFlags(stageFlags); err != nil {
		return nil, runUsage(env, "%v", err), false
	}
	if c.out == "-" && c.timestamps {
		return nil, runUsage(env, "-o - and --timestamps both write to standard output; write the audio to a file"), false
	}
	c.talker = talkerFlags(*voice, *speed)
	return c, ExitOK, true
}

// run drives the chain and reports.
func (c *runCommand) run(ctx context.Context, env Env) int {
	tracing, stopTracing, err := env.startTracing(ctx, "run", "run")
	if err != nil {
		return runUsage(env, "%v", err)
	}
	defer stopTracing()
	client := &hop.Client{TracerProvider: tracing.TracerProvider()}
	if c.apiKeyFile != "" {
		if client.APIKey, err = keyfile.Read(c.apiKeyFile); err != nil {
			return runUsage(env, "--api-key-file: %v", err)
		}
	}
	req, err := runRequest(c.text, c.requestID, c.timestamps, c.numIDs, c.talker)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage run: %v\n", err)
		return ExitFailure
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	sink, err := newAudioSink(env.Stdout, c.out)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage run: %v\n", err)
		return ExitFailure
	}
	start := time.Now()
	var words []engine.Word
	var text strings.Builder
	if tp := tracing.TracerProvider(); tp != nil {
		// One span for the whole chain; each hop's call is its child.
		var span trace.Span
		ctx, span = tp.Tracer(telemetry.Name).Start(ctx, "omnistage run", trace.WithAttributes(attribute.Int("omnistage.stages", c.numIDs)))
		defer span.End()
	}
	chain := &coordinator.Chain{Client: client, Stages: c.stages, AnswerTimeout: c.hopTimeout, OnCall: func(h coordinator.CallReport) { printCall(env.Stderr, h) }}
	res, err := chain.Run(ctx, req, func(kind engine.Kind, ch engine.Chunk) error {
		switch {
		case ch.Audio != nil:
			return sink.write(ch.Audio, start)
		case ch.Words != nil:
			words = append(words, ch.Words.Words...)
		case ch.Text != nil:
			text.WriteString(ch.Text.Text)
		}
		return nil
	})
	if cerr := sink.close(); err == nil && cerr != nil {
		err = fmt.Errorf("write audio: %w", cerr)
	}
	if err != nil {
		sink.discard()
		printRunError(env.Stderr, err)
		return ExitFailure
	}
	return reportRun(env, res, sink, text.String(), words, c.timestamps, time.Since(start))
}

// parseStageFlags turns the --stage flags into the servers of each stage
// id, and returns the number of stage ids they span (the highest plus one).
func parseStageFlags(flags []string) (map[int][]string, int, error) {
	if len(flags) == 0 {
		return nil, 0, errors.New("no --stage given: give each stage's server URL, stage 0 first")
	}
	stages := map[int][]string{}
	next, numIDs := 0, 0
	for _, f := range flags {
		id, list := next, f
		if i := strings.IndexByte(f, '='); i > 0 && isDigits(f[:i]) {
			n, err := strconv.Atoi(f[:i])
			if err != nil {
				return nil, 0, fmt.Errorf("--stage %q: bad stage id: %w", f, err)
			}
			id, list = n, f[i+1:]
		}
		if _, dup := stages[id]; dup {
			return nil, 0, fmt.Errorf("--stage %q: stage %d is given twice; list all its servers in one flag, separated by commas", f, id)
		}
		var urls []string
		for _, u := range strings.Split(list, ",") {
			u = strings.TrimSpace(u)
			if err := checkStageURL(u); err != nil {
				return nil, 0, fmt.Errorf("--stage %q: %w", f, err)
			}
			urls = append(urls, u)
		}
		stages[id] = urls
		next, numIDs = id+1, max(numIDs, id+1)
	}
	if _, ok := stages[0]; !ok {
		return nil, 0, errors.New("no server for stage 0: the first --stage without ID= is stage 0, or give 0=URL")
	}
	return stages, numIDs, nil
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func checkStageURL(s string) error {
	if s == "" {
		return errors.New("empty URL")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	return nil
}

// runRequest builds stage 0's request. The talker params go to
// sampling_params[0]; the array then has one entry per stage id the --stage
// flags span, the way the server wants it.
func runRequest(text, requestID string, timestamps bool, numIDs int, tp talker.Params) (*hop.RunRequest, error) {
	input, err := json.Marshal(engine.Prompt{Text: text})
	if err != nil {
		return nil, err
	}
	zero := 0
	req := &hop.RunRequest{StageID: &zero, StageInput: input, RequestID: requestID}
	if timestamps {
		req.OutputModalities = []string{string(engine.KindAudio), string(engine.KindTimestamps)}
	}
	req.SamplingParams, err = tp.SamplingParams(numIDs)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// printCall writes one progress line: a call of the chain.
func printCall(w io.Writer, h coordinator.CallReport) {
	if h.Err != nil {
		then := "giving up"
		switch {
		case h.Retrying && h.RetryURL == h.URL:
			then = "trying it again (the stage has no other server)"
		case h.Retrying:
			then = "trying " + h.RetryURL
		}
		fmt.Fprintf(w, "stage %d  %s  failed after %s: %v; %s\n", h.Stage, h.URL, ms(h.Duration), h.Err, then)
		return
	}
	next := "finished"
	if !h.Finished {
		next = fmt.Sprintf("next: stage %d", h.Next)
	}
	first := "no chunk"
	if h.Chunks > 0 {
		first = "first chunk after " + ms(h.FirstChunk)
	}
	fmt.Fprintf(w, "stage %d  %s  %s, done after %s  %d chunks  %s  %s\n", h.Stage, h.URL, first, ms(h.Duration), h.Chunks, byteSize(h.Bytes), next)
}

// ms renders d in whole milliseconds, so every line reads alike ("0ms",
// not "0s").
func ms(d time.Duration) string {
	return fmt.Sprintf("%dms", d.Round(time.Millisecond).Milliseconds())
}

func printRunError(w io.Writer, err error) {
	var he *hop.HTTPError
	var se *coordinator.CallError
	switch {
	case errors.As(err, &he) && errors.As(err, &se) && he.Status < 500:
		fmt.Fprintf(w, "omnistage run: stage %d at %s refused the request (%d %s): %s\n", se.Stage, se.URL, he.Status, he.Code, he.Message)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(w, "omnistage run: timed out: %v\n", err)
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(w, "omnistage run: interrupted")
	default:
		fmt.Fprintf(w, "omnistage run: %v\n", err)
	}
}

// reportRun prints the outcome of a finished run: the audio written, or
// the text answer, and the timestamps when asked for.
func reportRun(env Env, res *coordinator.Outcome, sink *audioSink, text string, words []engine.Word, timestamps bool, took time.Duration) int {
	if sink.samples == 0 {
		if text != "" {
			fmt.Fprintln(env.Stdout, text)
			return ExitOK
		}
		sink.discard()
		fmt.Fprintf(env.Stderr, "omnistage run: request %s finished at stage %d without audio\n", res.RequestID, res.Stage)
		return ExitFailure
	}
	fmt.Fprintf(env.Stderr, "request %s: wrote %s to %s (%.2f s of wav at %d Hz) in %s; first audio after %s\n",
		res.RequestID, byteSize(sink.bytes()), sink.where(), float64(sink.samples)/float64(sink.rate), sink.rate, took.Round(time.Millisecond), ms(sink.first))
	if timestamps {
		if words == nil {
			words = []engine.Word{}
		}
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(words); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage run: write timestamps: %v\n", err)
			return ExitFailure
		}
	}
	return ExitOK
}

// audioSink writes a run's audio as a WAV file while it arrives: a header
// whose sizes are unknown first, fixed at the end when the file can seek.
type audioSink struct {
	path    string // "-" for standard output
	w       io.Writer
	f       *os.File // nil for standard output
	rate    int
	samples int64
	first   time.Duration // from the start of the run to the first audio
	buf     []byte
}

func newAudioSink(stdout io.Writer, path string) (*audioSink, error) {
	if path == "-" {
		return &audioSink{path: path, w: stdout}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &audioSink{path: path, w: f, f: f}, nil
}

func (a *audioSink) write(au *engine.Audio, start time.Time) error {
	a.buf = a.buf[:0]
	if a.rate == 0 {
		a.rate, a.first = au.SampleRate, time.Since(start)
		a.buf = audio.AppendWAVHeader(a.buf, a.rate, audio.UnknownSize)
	} else if au.SampleRate != a.rate {
		return fmt.Errorf("the audio changes sample rate from %d to %d Hz", a.rate, au.SampleRate)
	}
	a.buf = append(a.buf, audio.PCMBytes(au.Samples)...)
	a.samples += int64(len(au.Samples))
	_, err := a.w.Write(a.buf)
	return err
}

func (a *audioSink) bytes() int64 { return audio.WAVHeaderLen + 2*a.samples }

func (a *audioSink) where() string {
	if a.path == "-" {
		return "standard output"
	}
	return a.path
}

// close writes the header's sizes into a file and closes it.
func (a *audioSink) close() error {
	if a.f == nil {
		return nil
	}
	var err error
	if a.rate != 0 {
		_, err = a.f.WriteAt(audio.WAVHeader(a.rate, uint32(min(2*a.samples, int64(audio.UnknownSize-1)))), 0)
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f = nil
	return err
}

// discard removes a file that holds no complete answer.
func (a *audioSink) discard() {
	if a.path != "-" {
		_ = os.Remove(a.path)
	}
}

// byteSize renders n bytes for people: "512 B", "12.3 KiB", "4.0 MiB".
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
