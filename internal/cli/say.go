package cli

// The say command: speak a text with a pipeline built in this process,
// and write its audio, word timestamps and captions.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/captions"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/flite/talker"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/telemetry"
	"github.com/omnistage/omnistage/internal/turns"
	"github.com/omnistage/omnistage/internal/voice"
)

// MaxSayInput bounds the text `say` reads from standard input.
const MaxSayInput = 1 << 20

func say(ctx context.Context, env Env, args []string) int {
	c, status, ok := parseSay(env, args)
	if !ok {
		return status
	}
	return c.run(ctx, env)
}

// sayCommand is a say command line, parsed and checked, with its pipeline
// loaded.
type sayCommand struct {
	cfg           *pipeline.Config
	req           orchestrator.Request
	stamps        bool   // print the word timestamps on stdout
	outPath       string // "-" for stdout
	audioFormat   string
	captionsPath  string // "" for none
	captionFormat string
	logLevel      slog.Level
	voice         string  // --voice: a voice or alias of the pipeline's ("": the talker's own)
	speed         float64 // --speed (0: the talker's own)
	image         bool    // --image: the request reads an image aloud
}

// sayUsage reports a usage error of say.
func sayUsage(env Env, err error) int {
	fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
	return ExitUsage
}

// parseSay parses and checks say's flags and loads the pipeline. When ok
// is false the command ends with status.
func parseSay(env Env, args []string) (c *sayCommand, status int, ok bool) {
	fs := newFlags(env, "say", "say [--config F] [--voice V] [--speed S] [--timestamps] [--captions F] [-o out.wav] [--format F] (TEXT | --image IMAGE)   (TEXT '-' reads stdin)")
	config := fs.String("config", "", "pipeline config file, or builtin:NAME (default: the built-in tts pipeline; with --image, read-aloud)")
	image := fs.String("image", "", "read this image's text aloud (PNG, JPEG or WebP; '-' reads stdin) instead of TEXT, with a pipeline whose input is an image")
	c = &sayCommand{logLevel: slog.LevelWarn}
	fs.StringVar(&c.voice, "voice", "", "voice of the talker stage, or an alias of one (GET /v1/audio/voices lists them: slt, rms, awb, OpenAI's names)")
	fs.Float64Var(&c.speed, "speed", 0, fmt.Sprintf("speaking rate, %g to %g (1 is normal)", talker.MinSpeed, talker.MaxSpeed))
	fs.BoolVar(&c.stamps, "timestamps", false, "also align the audio and print word timestamps as JSON on stdout")
	fs.StringVar(&c.outPath, "o", "out.wav", "write the audio here ('-' for stdout), in the format its extension names (mp3, opus, aac, flac, wav, pcm)")
	format := fs.String("format", "", "audio format, whatever -o's extension: mp3, opus, aac, flac, wav or pcm (default: by extension, else wav)")
	fs.StringVar(&c.captionsPath, "captions", "", "also write captions of the audio here: WebVTT for .vtt, SubRip for .srt")
	verbose := fs.Bool("v", false, "log the pipeline's start-up")
	pos, status, ok := parse(fs, args)
	if !ok {
		return nil, status, false
	}
	if *verbose {
		c.logLevel = slog.LevelDebug
	}
	var text string
	var img *engine.Image
	var err error
	if *image != "" {
		if len(pos) > 0 {
			return nil, sayUsage(env, errors.New("give TEXT or --image, not both")), false
		}
		if *config == "" {
			*config = "builtin:read-aloud"
		}
		if img, err = readImage(*image, env.Stdin); err != nil {
			return nil, sayUsage(env, err), false
		}
		c.image = true
	} else if text, err = sayText(pos, env.Stdin); err != nil {
		return nil, sayUsage(env, err), false
	}
	if c.outPath == "-" && c.stamps {
		return nil, sayUsage(env, errors.New("-o - and --timestamps would both write to stdout; give -o a file")), false
	}
	if c.audioFormat, err = outputFormat(*format, c.outPath); err != nil {
		return nil, sayUsage(env, err), false
	}
	if c.captionsPath != "" {
		c.captionFormat = strings.TrimPrefix(strings.ToLower(filepath.Ext(c.captionsPath)), ".")
		if !slices.Contains(captions.Formats, c.captionFormat) {
			return nil, sayUsage(env, fmt.Errorf("--captions %s: name a .vtt or .srt file", c.captionsPath)), false
		}
	}
	if c.cfg, err = env.loadConfig(*config); err != nil {
		printConfigError(env.Stderr, err)
		return nil, ExitUsage, false
	}
	c.req = orchestrator.Request{Prompt: engine.Prompt{Text: text}, Image: img, Modalities: []string{string(engine.KindAudio)}}
	if c.stamps || c.captionFormat != "" {
		c.req.Modalities = append(c.req.Modalities, string(engine.KindTimestamps))
		if c.image {
			// Word offsets point into the text read in the image.
			c.req.Modalities = append(c.req.Modalities, string(engine.KindText))
		}
	}
	if c.speed != 0 && !talker.SpeedOK(c.speed) {
		return nil, sayUsage(env, fmt.Errorf("--speed %g is out of range: use %g to %g", c.speed, talker.MinSpeed, talker.MaxSpeed)), false
	}
	return c, ExitOK, true
}

// talkerFlags are the talker params of the --voice and --speed flags,
// where "" and 0 leave the stage's own.
func talkerFlags(voice string, speed float64) talker.Params {
	p := talker.Params{Voice: voice}
	if speed != 0 {
		p.Speed = &speed
	}
	return p
}

// run speaks the text and writes the outputs. It builds only the stages
// the request runs: without timestamps, not the aligner.
func (c *sayCommand) run(ctx context.Context, env Env) int {
	sel, err := c.cfg.Route.Select(c.req.Modalities)
	if err != nil {
		return sayUsage(env, err)
	}
	o, stop, err := env.startLocal(ctx, "say", c.cfg, payload.NewCodec(nil), c.logLevel, nil, sel.Stages)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitFailure
	}
	defer stop()
	if c.req.Params, err = c.talkerParams(o); err != nil {
		return sayUsage(env, err)
	}
	start := time.Now()
	result, err := synthesize(ctx, o, c.req)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		if orchestrator.CodeOf(err) == orchestrator.CodeBadRequest {
			return ExitUsage
		}
		return ExitFailure
	}
	if result.audio == nil {
		// An image with no text the voices can speak: silence, said.
		for _, n := range result.notes {
			fmt.Fprintf(env.Stderr, "note: stage %d: %s\n", n.Stage, n.Message)
		}
		fmt.Fprintln(env.Stderr, "omnistage say: the image has no text to speak; nothing written")
		return ExitOK
	}
	if err := writeAudio(env, c.outPath, c.audioFormat, result.audio); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitFailure
	}
	result.words = delayWords(result.words, encode.Lead(c.audioFormat, result.audio.SampleRate, encode.Options{}))
	if c.captionFormat != "" {
		if err := c.writeCaptions(result); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage say: captions: %v\n", err)
			return ExitFailure
		}
	}
	seconds := float64(len(result.audio.Samples)) / float64(result.audio.SampleRate)
	if c.outPath != "-" {
		fmt.Fprintf(env.Stderr, "wrote %s: %.2f s of %d Hz audio in %.2f s\n", c.outPath, seconds, result.audio.SampleRate, time.Since(start).Seconds())
	}
	for _, n := range result.notes {
		fmt.Fprintf(env.Stderr, "note: stage %d: %s\n", n.Stage, n.Message)
	}
	if c.stamps {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		words := result.words
		if words == nil {
			words = []engine.Word{}
		}
		var v any = words
		if c.image {
			v = struct {
				Text  string        `json:"text"`
				Words []engine.Word `json:"words"`
			}{result.text, words}
		}
		if err := enc.Encode(v); err != nil {
			return ExitFailure
		}
	}
	return ExitOK
}

// talkerParams returns the request's sampling params: the talker's voice
// (what --voice names on this pipeline: one of its voices or aliases, as
// a speech request's voice does) and speed.
func (c *sayCommand) talkerParams(o *orchestrator.Orchestrator) ([]json.RawMessage, error) {
	v := c.voice
	if v != "" {
		var err error
		if v, err = voice.NewCache(o, c.cfg.VoiceAliases).Set().Resolve(v); err != nil {
			return nil, fmt.Errorf("--voice: %w", err)
		}
	}
	return talkerFlags(v, c.speed).SamplingParams(c.cfg.Route.NumIDs())
}

// writeCaptions writes the captions of the spoken text.
func (c *sayCommand) writeCaptions(result *sayResult) error {
	words := result.words
	var b bytes.Buffer
	text := c.req.Prompt.Text
	if c.image {
		text = result.text
	}
	if err := captions.Write(&b, c.captionFormat, captions.Cues(text, words)); err != nil {
		return err
	}
	return os.WriteFile(c.captionsPath, b.Bytes(), 0o644)
}

// delayWords moves words lead later, to whole milliseconds: the times at
// which a file whose format plays its audio lead late (aac, which cannot
// state its encoder's priming: encode.Lead) plays them.
func delayWords(words []engine.Word, lead time.Duration) []engine.Word {
	ms := int((lead + time.Millisecond/2) / time.Millisecond)
	for i := range words {
		words[i].StartMs += ms
		words[i].EndMs += ms
	}
	return words
}

// sayText returns the text to speak: the arguments, or stdin for "-".
func sayText(pos []string, stdin io.Reader) (string, error) {
	if len(pos) == 0 {
		return "", errors.New("no text given: omnistage say [flags] TEXT (or '-' to read stdin)")
	}
	if len(pos) == 1 && pos[0] == "-" {
		data, err := io.ReadAll(io.LimitReader(stdin, MaxSayInput+1))
		if err != nil {
			return "", fmt.Errorf("read stdin: %w", err)
		}
		if len(data) > MaxSayInput {
			return "", fmt.Errorf("stdin holds more than %d bytes", MaxSayInput)
		}
		pos = []string{string(data)}
	}
	text := strings.TrimSpace(strings.Join(pos, " "))
	if text == "" {
		return "", errors.New("the text is empty")
	}
	return text, nil
}

type sayResult struct {
	audio *engine.Audio
	words []engine.Word
	text  string // the text read in an image (--image), which words point into
	notes []orchestrator.Note
}

// synthesize runs one request and gathers its audio and word timestamps.
func synthesize(ctx context.Context, o *orchestrator.Orchestrator, req orchestrator.Request) (*sayResult, error) {
	s, err := o.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	outs, err := s.Collect(ctx)
	if err != nil {
		return nil, err
	}
	res := &sayResult{}
	for _, out := range outs {
		switch out.Kind {
		case engine.KindAudio:
			if res.audio, err = engine.JoinAudio(out.Chunks); err != nil {
				return nil, fmt.Errorf("stage %d: %w", out.Stage, err)
			}
		case engine.KindTimestamps:
			res.words = engine.JoinWords(out.Chunks)
		case engine.KindText:
			r, err := apijson.Render(out.Kind, out.Chunks)
			if err != nil {
				return nil, fmt.Errorf("stage %d: %w", out.Stage, err)
			}
			res.text = r.Text
		}
	}
	res.notes = s.Notes()
	if res.audio == nil && req.Image == nil {
		return nil, errors.New("the pipeline produced no audio")
	}
	return res, nil
}

// outputFormat is the audio format of say's output: format if given,
// else the one path's extension names, else wav.
func outputFormat(format, path string) (string, error) {
	if format != "" {
		format = strings.ToLower(format)
		if _, ok := encode.ContentType(format); !ok {
			return "", fmt.Errorf("--format %q: want one of %s", format, strings.Join(encode.Formats(), ", "))
		}
		return format, encode.Available(format)
	}
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if _, ok := encode.ContentType(ext); ok {
		return ext, encode.Available(ext)
	}
	return encode.WAV, nil
}

func writeAudio(env Env, path, format string, a *engine.Audio) error {
	b, err := encode.Whole(format, a.SampleRate, a.Samples, encode.Options{})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", format, err)
	}
	if path == "-" {
		_, err := env.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// startLocal builds and starts an orchestrator for cfg in this process,
// logging at level to stderr, its requests taking turns on the CPU from
// sched when not nil, and returns it with the function that shuts it
// down (its failure reported as command's). Stages, when not nil, are
// the only ones it builds.
func (env Env) startLocal(ctx context.Context, command string, cfg *pipeline.Config, codec *payload.Codec, level slog.Level, sched *turns.Scheduler, stages []int) (*orchestrator.Orchestrator, func(), error) {
	tracing, stopTracing, err := env.startTracing(ctx, command, command)
	if err != nil {
		return nil, nil, err
	}
	opts := env.orchestratorOptions(cfg, codec, tracing.TracerProvider(), sched)
	opts.Logger = slog.New(telemetry.LogHandler(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level})))
	opts.Stages = stages
	o, err := orchestrator.New(cfg, opts)
	if err != nil {
		stopTracing()
		return nil, nil, err
	}
	stop := func() {
		defer stopTracing()
		sctx, cancel := context.WithTimeout(context.Background(), cfg.Deploy.AbortTimeout+10*time.Second)
		defer cancel()
		if err := o.Shutdown(sctx); err != nil {
			fmt.Fprintf(env.Stderr, "omnistage %s: shutdown: %v\n", command, err)
		}
	}
	if err := o.Start(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return o, stop, nil
}
