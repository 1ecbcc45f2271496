package remote

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// The option keys the remote engine reads from engine.Spec.Options. The
// first three are set by the runtime, not by the config file; the others
// may come from the stage's deploy options.
const (
	// OptEndpoint is the stage server's base URL (string), one per replica.
	OptEndpoint = "endpoint"
	// OptPipeline is the *pipeline.Config this process serves: the
	// pipeline's name, digest and route go into every payload.
	OptPipeline = "pipeline"
	// OptCodec is the *payload.Codec that signs the payloads this process
	// sends and checks those it gets back; it must hold the stage servers'
	// key. Absent, the engine reads OptPayloadKeyFile, or sends unsigned
	// payloads.
	OptCodec = "codec"

	// OptPayloadKeyFile names a file holding the payload key (string).
	OptPayloadKeyFile = "payload_key_file"
	// OptAPIKeyFile names a file holding the stage server's API key
	// (string), sent as a bearer token.
	OptAPIKeyFile = "api_key_file"
	// OptAPIKey is the stage server's API key itself, passed by the runtime
	// (a worker process's key); it is not a config file option.
	OptAPIKey = "api_key"
	// OptTimeout bounds one /v1/run call (duration string, "30s"); default
	// none beyond the request's own.
	OptTimeout = "timeout"
	// OptWarmTimeout bounds how long Warm waits for the server's /ready
	// (duration string); default DefaultWarmTimeout.
	OptWarmTimeout = "warm_timeout"
	// OptHealthInterval is the period of the /health checks (duration
	// string); default DefaultHealthInterval.
	OptHealthInterval = "health_interval"
	// OptHealthFailures is the number of failed /health checks in a row
	// after which the replica is lost (integer); default
	// DefaultHealthFailures.
	OptHealthFailures = "health_failures"
)

// Defaults of the options.
const (
	DefaultWarmTimeout    = 2 * time.Minute
	DefaultHealthInterval = 2 * time.Second
	DefaultHealthFailures = 3
)

// settings are a replica's options, checked.
type settings struct {
	endpoint       string
	cfg            *pipeline.Config
	codec          *payload.Codec
	apiKey         string
	timeout        time.Duration
	warmTimeout    time.Duration
	healthInterval time.Duration
	healthFailures int
}

// parseOptions reads the options the engine knows. Other keys are ignored:
// for a stage with placement remote the runtime passes the stage's own
// engine options too, which are for the stage server, not for this engine.
func parseOptions(o engine.Options) (*settings, error) {
	s := &settings{warmTimeout: DefaultWarmTimeout, healthInterval: DefaultHealthInterval, healthFailures: DefaultHealthFailures}
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("option %s: "+format, append([]any{key}, args...)...))
	}

	switch v := o[OptEndpoint].(type) {
	case string:
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(OptEndpoint, "%q is not an http:// or https:// URL", v)
		}
		s.endpoint = strings.TrimRight(v, "/")
	case nil:
		bad(OptEndpoint, "missing: the runtime passes one stage server URL per replica")
	default:
		bad(OptEndpoint, "want a URL string, got %T", v)
	}

	switch v := o[OptPipeline].(type) {
	case *pipeline.Config:
		if v == nil || v.Route == nil {
			bad(OptPipeline, "the pipeline has no resolved route")
		}
		s.cfg = v
	case nil:
		bad(OptPipeline, "missing: the runtime passes the *pipeline.Config it serves")
	default:
		bad(OptPipeline, "want the *pipeline.Config the runtime serves, got %T (it is not a config file option)", v)
	}

	switch v := o[OptCodec].(type) {
	case *payload.Codec:
		s.codec = v
	case nil:
	default:
		bad(OptCodec, "want a *payload.Codec, got %T (it is not a config file option; use %s)", v, OptPayloadKeyFile)
	}
	if file, ok := stringOpt(o, OptPayloadKeyFile, bad); ok {
		key, err := readKey(file)
		switch {
		case err != nil:
			bad(OptPayloadKeyFile, "%v", err)
		case s.codec != nil:
			bad(OptPayloadKeyFile, "the runtime already passes the payload codec; drop this option")
		default:
			s.codec = payload.NewCodec([]byte(key))
		}
	}
	if s.codec == nil {
		s.codec = payload.NewCodec(nil)
	}
	if file, ok := stringOpt(o, OptAPIKeyFile, bad); ok {
		key, err := readKey(file)
		if err != nil {
			bad(OptAPIKeyFile, "%v", err)
		}
		s.apiKey = key
	}
	if key, ok := stringOpt(o, OptAPIKey, bad); ok {
		if s.apiKey != "" {
			bad(OptAPIKey, "the runtime passes the key; drop %s", OptAPIKeyFile)
		}
		s.apiKey = key
	}

	durationOpt(o, OptTimeout, &s.timeout, bad)
	durationOpt(o, OptWarmTimeout, &s.warmTimeout, bad)
	durationOpt(o, OptHealthInterval, &s.healthInterval, bad)
	switch v := o[OptHealthFailures].(type) {
	case nil:
	case int:
		s.healthFailures = v
	case float64: // JSON numbers
		s.healthFailures = int(v)
		if float64(s.healthFailures) != v {
			bad(OptHealthFailures, "want a whole number, got %v", v)
		}
	default:
		bad(OptHealthFailures, "want a number, got %T", v)
	}
	if s.healthFailures < 1 {
		bad(OptHealthFailures, "must be at least 1, got %d", s.healthFailures)
	}
	return s, errors.Join(errs...)
}

func stringOpt(o engine.Options, key string, bad func(string, string, ...any)) (string, bool) {
	switch v := o[key].(type) {
	case nil:
		return "", false
	case string:
		if v == "" {
			bad(key, "empty")
			return "", false
		}
		return v, true
	default:
		bad(key, "want a string, got %T", v)
		return "", false
	}
}

func durationOpt(o engine.Options, key string, dst *time.Duration, bad func(string, string, ...any)) {
	switch v := o[key].(type) {
	case nil:
	case time.Duration:
		*dst = v
	case string:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(key, "want a positive duration such as \"5s\", got %q", v)
			return
		}
		*dst = d
	default:
		bad(key, "want a duration string such as \"5s\", got %T", v)
	}
}

// readKey reads a key file, dropping surrounding white space.
func readKey(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	return key, nil
}
