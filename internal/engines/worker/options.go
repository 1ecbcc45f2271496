package worker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/remote"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// The option keys the worker engine reads from engine.Spec.Options. They
// are set by the runtime (Go code), not by config files: a stage's deploy
// options are its engine's own, which the worker process applies. The
// other keys are handed to the remote engine that reaches the worker (see
// package remote), so its timeout, warm_timeout, health_interval and
// health_failures apply.
const (
	// OptPipeline is the *pipeline.Config this process serves. Its Source
	// (a file or builtin:NAME) is what the worker process loads.
	OptPipeline = remote.OptPipeline
	// OptExecutable is the program started as the worker (string); default
	// this process's own executable, os.Executable().
	OptExecutable = "executable"
	// OptStderr is the io.Writer that gets the worker's output (its stderr,
	// and its stdout but the announcement), each line prefixed with the
	// replica id; default os.Stderr.
	OptStderr = "stderr"
	// OptStartTimeout bounds how long New waits for the worker to listen
	// (time.Duration or duration string); default DefaultStartTimeout.
	OptStartTimeout = "start_timeout"
	// OptStopTimeout bounds how long Close waits for the worker to exit
	// after asking it to stop, before killing it (time.Duration or
	// duration string); default DefaultStopTimeout.
	OptStopTimeout = "stop_timeout"
)

// Defaults of the options.
const (
	DefaultStartTimeout = time.Minute
	DefaultStopTimeout  = 10 * time.Second
)

// settings are a replica's options, checked.
type settings struct {
	cfg          *pipeline.Config
	exe          string
	stderr       io.Writer
	startTimeout time.Duration
	stopTimeout  time.Duration
}

func parseOptions(o engine.Options) (*settings, error) {
	s := &settings{stderr: os.Stderr, startTimeout: DefaultStartTimeout, stopTimeout: DefaultStopTimeout}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("option %s: "+format, append([]any{key}, args...)...))
	}
	switch v := o[OptPipeline].(type) {
	case *pipeline.Config:
		switch {
		case v == nil || v.Route == nil:
			bad(OptPipeline, "the pipeline has no resolved route")
		case v.Source == "":
			bad(OptPipeline, "the pipeline was not loaded from a file or a built-in, so a worker process cannot load it")
		}
		s.cfg = v
	case nil:
		bad(OptPipeline, "missing: the runtime passes the *pipeline.Config it serves")
	default:
		bad(OptPipeline, "want the *pipeline.Config the runtime serves, got %T (it is not a config file option)", v)
	}
	switch v := o[OptExecutable].(type) {
	case string:
		if v == "" {
			bad(OptExecutable, "empty")
		}
		s.exe = v
	case nil:
		exe, err := os.Executable()
		if err != nil {
			bad(OptExecutable, "not set, and this process's executable is unknown: %v", err)
		}
		s.exe = exe
	default:
		bad(OptExecutable, "want a path, got %T", v)
	}
	switch v := o[OptStderr].(type) {
	case io.Writer:
		s.stderr = v
	case nil:
	default:
		bad(OptStderr, "want an io.Writer, got %T (it is not a config file option)", v)
	}
	duration(o, OptStartTimeout, &s.startTimeout, bad)
	duration(o, OptStopTimeout, &s.stopTimeout, bad)
	return s, errors.Join(errs...)
}

func duration(o engine.Options, key string, dst *time.Duration, bad func(string, string, ...any)) {
	var d time.Duration
	switch v := o[key].(type) {
	case nil:
		return
	case time.Duration:
		d = v
	case string:
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			bad(key, "want a duration such as \"5s\", got %q", v)
			return
		}
	default:
		bad(key, "want a duration, got %T", v)
		return
	}
	if d <= 0 {
		bad(key, "must be positive, got %s", d)
		return
	}
	*dst = d
}

// remoteOptions are the options of the remote engine that reaches the
// worker listening at addr: the replica's own, with the endpoint and the
// worker's codec. The worker checks payloads with its own key, so a key
// file meant for stage servers does not apply.
func remoteOptions(o engine.Options, addr string, codec *payload.Codec, apiKey string) engine.Options {
	out := make(engine.Options, len(o)+3)
	for k, v := range o {
		out[k] = v
	}
	delete(out, remote.OptPayloadKeyFile)
	delete(out, remote.OptAPIKeyFile)
	out[remote.OptEndpoint] = "http://" + addr
	out[remote.OptCodec] = codec
	out[remote.OptAPIKey] = apiKey
	return out
}
