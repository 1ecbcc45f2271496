package cli

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

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/runclient"
	"github.com/omnistage/omnistage/internal/wire"
)

const runSynopsis = "run --stage URL [--stage URL ...] [-o out.wav] [--timestamps] [--voice V] [--speed S] [--api-key-file F] TEXT"

const runHelp = `Drives headless stage servers (omnistage serve --stage N) over POST /v1/run:
posts TEXT to stage 0, then each answer's stage_input to the stage the answer
names, until the last stage returns the audio. TEXT '-' reads standard input.

Each --stage gives one stage's servers, as ID=URL[,URL...] or URL[,URL...].
Without ID= a flag names the stage after the previous flag's (the first is
stage 0), so
  --stage http://127.0.0.1:8101 --stage http://127.0.0.1:8102
is stage 0 and stage 1, and
  --stage 0=http://a:8101,http://b:8101 --stage 1=http://c:8102
gives stage 0 two servers: calls start at each in turn, and a call that gets
no answer or a 5xx moves on to the next (calls are stateless, so this is
safe). A 4xx ends the run with the server's message.

A progress line per call goes to standard error. The audio is written to -o
(out.wav unless given; '-' writes it to standard output); --timestamps also
requests word timestamps and prints them as JSON to standard output.

Exit status: 0 on success, 1 when a call fails, 2 on a usage error.
`

func runCoordinator(ctx context.Context, env Env, args []string) int {
	fs := newFlags(env, "run", runSynopsis)
	base := fs.Usage
	fs.Usage = func() {
		base()
		fmt.Fprint(env.Stderr, "\n", runHelp)
	}
	var stageFlags multiFlag
	fs.Var(&stageFlags, "stage", "a stage's servers: `[ID=]URL[,URL...]`; repeat once per stage (see below)")
	out := fs.String("o", "out.wav", "write the audio to `FILE` ('-' for standard output)")
	timestamps := fs.Bool("timestamps", false, "also request word timestamps and print them as JSON to standard output")
	voice := fs.String("voice", "", "stage 0's voice (sampling_params[0].voice)")
	speed := fs.Float64("speed", 0, "stage 0's speaking rate, 1 is normal; 0 leaves the server's default (sampling_params[0].speed)")
	apiKeyFile := fs.String("api-key-file", "", "send the API key in `FILE` as a bearer token")
	requestID := fs.String("request-id", "", "the request id (default: the server generates one)")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: no limit)")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "omnistage run: "+format+"\n", a...)
		fmt.Fprintf(env.Stderr, "usage: omnistage %s\n", runSynopsis)
		return ExitUsage
	}
	text, err := sayText(pos, env.Stdin)
	if err != nil {
		return usageErr("%v", err)
	}
	stages, numIDs, err := parseStageFlags(stageFlags)
	if err != nil {
		return usageErr("%v", err)
	}
	if *out == "-" && *timestamps {
		return usageErr("-o - and --timestamps both write to standard output; write the audio to a file")
	}
	client := &runclient.Client{}
	if *apiKeyFile != "" {
		if client.APIKey, err = readKey(*apiKeyFile, nil); err != nil {
			return usageErr("--api-key-file: %v", err)
		}
	}

	req, err := runRequest(text, *requestID, *timestamps, numIDs, *voice, *speed)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage run: %v\n", err)
		return ExitFailure
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	chain := &runclient.Chain{Client: client, Stages: stages, OnHop: func(h runclient.Hop) { printHop(env.Stderr, h) }}
	start := time.Now()
	resp, err := chain.Run(ctx, req)
	if err != nil {
		printRunError(env.Stderr, err)
		return ExitFailure
	}
	return writeRunOutput(env, resp, *out, *timestamps, time.Since(start))
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

// runRequest builds stage 0's request. Voice and speed go to
// sampling_params[0]; the array then has one entry per stage id the --stage
// flags span, the way the server wants it.
func runRequest(text, requestID string, timestamps bool, numIDs int, voice string, speed float64) (*wire.RunRequest, error) {
	input, err := json.Marshal(wire.Prompt{Text: text})
	if err != nil {
		return nil, err
	}
	zero := 0
	req := &wire.RunRequest{StageID: &zero, StageInput: input, RequestID: requestID}
	if timestamps {
		req.OutputModalities = []string{string(engine.KindAudio), string(engine.KindTimestamps)}
	}
	if voice != "" || speed != 0 {
		p := map[string]any{}
		if voice != "" {
			p["voice"] = voice
		}
		if speed != 0 {
			p["speed"] = speed
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		req.SamplingParams = make([]json.RawMessage, numIDs)
		req.SamplingParams[0] = raw
	}
	return req, nil
}

// printHop writes one progress line.
func printHop(w io.Writer, h runclient.Hop) {
	// Whole milliseconds always, so every line reads alike ("0ms", not "0s").
	took := fmt.Sprintf("%dms", h.Duration.Round(time.Millisecond).Milliseconds())
	if h.Err != nil {
		then := "giving up"
		if h.Retrying {
			then = "trying another server"
		}
		fmt.Fprintf(w, "stage %d  %s  failed after %s: %v; %s\n", h.Stage, h.URL, took, h.Err, then)
		return
	}
	next := "finished"
	if !h.Response.Finished {
		next = fmt.Sprintf("next: stage %d", h.Response.StageID)
	}
	fmt.Fprintf(w, "stage %d  %s  %s  sent %s  received %s  %s\n", h.Stage, h.URL, took, byteSize(h.RequestBytes), byteSize(h.ResponseBytes), next)
}

func printRunError(w io.Writer, err error) {
	var he *runclient.HTTPError
	var se *runclient.StageError
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

func writeRunOutput(env Env, resp *wire.RunResponse, out string, timestamps bool, took time.Duration) int {
	o := resp.Output
	if o.Audio == nil || len(o.Audio.Data) == 0 {
		if o.Text != "" {
			fmt.Fprintln(env.Stdout, o.Text)
			return ExitOK
		}
		fmt.Fprintf(env.Stderr, "omnistage run: request %s finished at stage %d without audio\n", resp.RequestID, resp.StageID)
		return ExitFailure
	}
	if out == "-" {
		if _, err := env.Stdout.Write(o.Audio.Data); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage run: write audio: %v\n", err)
			return ExitFailure
		}
	} else {
		if err := os.WriteFile(out, o.Audio.Data, 0o644); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage run: %v\n", err)
			return ExitFailure
		}
	}
	where := out
	if out == "-" {
		where = "standard output"
	}
	fmt.Fprintf(env.Stderr, "request %s: wrote %s to %s (%.2f s of %s at %d Hz) in %s\n",
		resp.RequestID, byteSize(int64(len(o.Audio.Data))), where, float64(o.Audio.DurationMs)/1000, o.Audio.Format, o.Audio.SampleRate, took.Round(time.Millisecond))
	if timestamps {
		words := o.Timestamps
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
