package cli

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

	"github.com/omnistage/omnistage/internal/audio/encode"
	"github.com/omnistage/omnistage/internal/captions"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/telemetry"
)

// MaxSayInput bounds the text `say` reads from standard input.
const MaxSayInput = 1 << 20

func say(ctx context.Context, env Env, args []string) int {
	fs := newFlags(env, "say", "say [--config F] [--voice V] [--speed S] [--timestamps] [--captions F] [-o out.wav] [--format F] TEXT   (TEXT '-' reads stdin)")
	config := fs.String("config", "", "pipeline config file, or builtin:NAME (default: the built-in tts pipeline)")
	voice := fs.String("voice", "", "voice of the talker stage (slt, rms, awb; kal16 needs a diphone pipeline)")
	speed := fs.Float64("speed", 0, "speaking rate, 0.25 to 4 (1 is normal)")
	stamps := fs.Bool("timestamps", false, "also align the audio and print word timestamps as JSON on stdout")
	outPath := fs.String("o", "out.wav", "write the audio here ('-' for stdout), in the format its extension names (mp3, opus, aac, flac, wav, pcm)")
	format := fs.String("format", "", "audio format, whatever -o's extension: mp3, opus, aac, flac, wav or pcm (default: by extension, else wav)")
	captionsPath := fs.String("captions", "", "also write captions of the audio here: WebVTT for .vtt, SubRip for .srt")
	verbose := fs.Bool("v", false, "log the pipeline's start-up")
	pos, status, ok := parse(fs, args)
	if !ok {
		return status
	}
	text, err := sayText(pos, env.Stdin)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitUsage
	}
	if *outPath == "-" && *stamps {
		fmt.Fprintln(env.Stderr, "omnistage say: -o - and --timestamps would both write to stdout; give -o a file")
		return ExitUsage
	}
	audioFormat, err := outputFormat(*format, *outPath)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitUsage
	}
	captionFormat := ""
	if *captionsPath != "" {
		captionFormat = strings.TrimPrefix(strings.ToLower(filepath.Ext(*captionsPath)), ".")
		if !slices.Contains(captions.Formats, captionFormat) {
			fmt.Fprintf(env.Stderr, "omnistage say: --captions %s: name a .vtt or .srt file\n", *captionsPath)
			return ExitUsage
		}
	}
	cfg, err := env.loadConfig(*config)
	if err != nil {
		printConfigError(env.Stderr, err)
		return ExitUsage
	}
	params, err := talkerParams(cfg, *voice, *speed)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitUsage
	}
	modalities := []string{string(engine.KindAudio)}
	if *stamps || captionFormat != "" {
		modalities = append(modalities, string(engine.KindTimestamps))
	}

	logLevel := slog.LevelWarn
	if *verbose {
		logLevel = slog.LevelDebug
	}
	o, stop, err := env.startLocal(ctx, "say", cfg, payload.NewCodec(nil), logLevel)
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitFailure
	}
	defer stop()
	start := time.Now()
	result, err := synthesize(ctx, o, orchestrator.Request{Prompt: engine.Prompt{Text: text}, Modalities: modalities, Params: params})
	if err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		if orchestrator.CodeOf(err) == orchestrator.CodeBadRequest {
			return ExitUsage
		}
		return ExitFailure
	}
	if err := writeAudio(env, *outPath, audioFormat, result.audio); err != nil {
		fmt.Fprintf(env.Stderr, "omnistage say: %v\n", err)
		return ExitFailure
	}
	if captionFormat != "" {
		var b bytes.Buffer
		err := captions.Write(&b, captionFormat, captions.Cues(text, result.words))
		if err == nil {
			err = os.WriteFile(*captionsPath, b.Bytes(), 0o644)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "omnistage say: captions: %v\n", err)
			return ExitFailure
		}
	}
	seconds := float64(len(result.audio.Samples)) / float64(result.audio.SampleRate)
	if *outPath != "-" {
		fmt.Fprintf(env.Stderr, "wrote %s: %.2f s of %d Hz audio in %.2f s\n", *outPath, seconds, result.audio.SampleRate, time.Since(start).Seconds())
	}
	if *stamps {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		words := result.words
		if words == nil {
			words = []engine.Word{}
		}
		if err := enc.Encode(words); err != nil {
			return ExitFailure
		}
	}
	return ExitOK
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

// talkerParams builds a sampling_params array with the voice and speed for
// the route's entry stage (stage 0), or nil when neither is set.
func talkerParams(cfg *pipeline.Config, voice string, speed float64) ([]json.RawMessage, error) {
	p := map[string]any{}
	if voice != "" {
		p["voice"] = voice
	}
	if speed != 0 {
		if speed < 0.25 || speed > 4 {
			return nil, fmt.Errorf("--speed %g is out of range: use 0.25 to 4", speed)
		}
		p["speed"] = speed
	}
	if len(p) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	params := make([]json.RawMessage, cfg.Route.NumIDs())
	params[0] = raw
	return params, nil
}

type sayResult struct {
	audio *engine.Audio
	words []engine.Word
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
		}
	}
	if res.audio == nil {
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
	var buf bytes.Buffer
	enc, err := encode.New(format, &buf, a.SampleRate, encode.Options{TotalSamples: int64(len(a.Samples))})
	if err != nil {
		return err
	}
	err = enc.Write(a.Samples)
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("encoding %s: %w", format, err)
	}
	if path == "-" {
		_, err := env.Stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// startLocal builds and starts an orchestrator for cfg in this process,
// logging at level to stderr, and returns it with the function that shuts
// it down (its failure reported as command's).
func (env Env) startLocal(ctx context.Context, command string, cfg *pipeline.Config, codec *payload.Codec, level slog.Level) (*orchestrator.Orchestrator, func(), error) {
	tracing, stopTracing, err := env.startTracing(ctx, command, command)
	if err != nil {
		return nil, nil, err
	}
	opts := env.orchestratorOptions(cfg, codec, tracing.TracerProvider())
	opts.Logger = slog.New(telemetry.LogHandler(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level})))
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
