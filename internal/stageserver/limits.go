package stageserver

// Limits: how long a streamed hop on a stage server may take, and how
// slowly its caller may send, so that a slow or stalled sender cannot hold
// a replica.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// Limits bound every streamed hop of a Server (ServerOptions.Limits).
//
// A hop's input is a stream of frames that its producer sends as it makes
// them: an honest caller writes each frame whole, at once, and pauses only
// between frames while its upstream stage works (a talker between two
// sentences, a model of one's own on a long one). So the input's rate is
// not measured in bytes per second of the whole stream, which an honest
// pause would break: it is measured within a frame. Once a frame's first
// byte has arrived (the header's at once: a caller sends it first), each
// InputWindow the server waits for the rest of it must bring
// MinInputRate × InputWindow bytes, or the frame's end. A sender that
// trickles (a byte every few seconds) is cut within one window of its
// first byte; an honest one is never near the bound, whose frames of
// about 3 KB (100 ms of audio) to a few MB (a sentence's frames) come
// whole. Only the time spent waiting in reads counts: not the time the
// stage takes to want the next frame. The pause between two frames is
// bounded by ServerOptions.BodyReadTimeout. Breaking either is a 408
// body_timeout.
//
// MaxDuration bounds the whole hop, however its input comes: a sender that
// sends whole frames just often enough cannot hold a replica for longer.
// It ends a hop whose input is still coming with a 408 body_timeout, and
// one whose input had ended (the stage or the answer's reader was too
// slow) with a 504 timeout.
//
// One-shot (JSON) calls read their whole body under BodyReadTimeout
// before anything runs, so only the streamed form needs these bounds.
type Limits struct {
	// MinInputRate is the rate, in bytes per second, below which a frame
	// under way is cut; 0 means DefaultMinInputRate, negative no bound.
	MinInputRate int64
	// InputWindow is the wait over which MinInputRate is measured; 0
	// means DefaultInputWindow.
	InputWindow time.Duration
	// MaxDuration bounds a streamed hop, from its call checked to its
	// end; 0 means the pipeline's max_audio_seconds plus
	// DefaultMaxDurationMargin (15 minutes by default), negative no bound.
	MaxDuration time.Duration
}

// Defaults of Limits.
const (
	// DefaultMinInputRate is 8 KiB/s: 40 KiB in each 5 s window, less
	// than any link between servers carries in a fraction of that.
	DefaultMinInputRate = 8 << 10
	DefaultInputWindow  = 5 * time.Second
	// DefaultMaxDurationMargin is added to the longest audio a request
	// may make (max_audio_seconds, 10 minutes by default), which a caller
	// that plays it as it comes reads at real time.
	DefaultMaxDurationMargin = 5 * time.Minute
)

// withDefaults returns l with its defaults for cfg filled in, and its
// bounds turned off (0) where l asks for none.
func (l Limits) withDefaults(cfg *pipeline.Config) Limits {
	switch {
	case l.MinInputRate == 0:
		l.MinInputRate = DefaultMinInputRate
	case l.MinInputRate < 0:
		l.MinInputRate = 0
	}
	if l.InputWindow <= 0 {
		l.InputWindow = DefaultInputWindow
	}
	switch {
	case l.MaxDuration == 0:
		l.MaxDuration = time.Duration(cfg.Deploy.MaxAudioSeconds)*time.Second + DefaultMaxDurationMargin
	case l.MaxDuration < 0:
		l.MaxDuration = 0
	}
	return l
}

// rated reports whether a frame under way has a minimum rate.
func (l Limits) rated() bool { return l.MinInputRate > 0 }

// windowBytes is what a frame under way must bring in each window.
func (l Limits) windowBytes() int64 {
	return l.MinInputRate * int64(l.InputWindow/time.Millisecond) / 1000
}

// bound returns r with a context that ends with the hop's error when the
// hop outlasts MaxDuration, and a func that lifts the bound. input is the
// hop's streamed input, nil when it came whole.
func (s *Server) bound(r *http.Request, input *bodyReader) (*http.Request, func()) {
	longest := s.opts.Limits.MaxDuration
	if longest <= 0 {
		return r, func() {}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	t := time.AfterFunc(longest, func() {
		if input != nil && !input.isEnded() {
			cancel(httperr.Errorf(http.StatusRequestTimeout, httperr.CodeBodyTimeout,
				"the hop's input did not end within the hop's longest time, %s", longest))
			return
		}
		cancel(httperr.Errorf(http.StatusGatewayTimeout, string(orchestrator.CodeDeadline), "the hop did not end within its longest time, %s", longest))
	})
	return r.WithContext(ctx), func() {
		t.Stop()
		cancel(nil)
	}
}

// hopError returns the error a failed streamed hop answers with: when
// its input's failure ended it (its caller went away, or broke a bound),
// that failure; when one of the hop's own bounds ended r's context, that
// bound's error; else err, the failure as the stage saw it, which may
// only say that the context ended. The input's failure is read once its
// reader has stopped, since net/http ends the request's context as soon
// as a read of the connection fails, before the reader has returned.
func hopError(r *http.Request, c *call, err error) error {
	if f, ok := c.input.(*frameSource); ok {
		if failure := f.inputFailure(); failure != nil {
			return failure
		}
	}
	if r.Context().Err() == nil {
		return err
	}
	var he *httperr.Error
	if cause := context.Cause(r.Context()); errors.As(cause, &he) {
		return cause
	}
	return err
}
