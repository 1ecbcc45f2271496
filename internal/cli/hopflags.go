package cli

// serve's bounds of a streamed /v1/run hop (package stageserver's Limits): the
// rate a frame under way must arrive at, and a hop's longest time.

import (
	"errors"
	"flag"
	"time"

	"github.com/omnistage/omnistage/internal/stageserver"
)

// hopLimitFlags are the --hop-* flags of serve.
type hopLimitFlags struct {
	minInputRate int64
	inputWindow  time.Duration
	maxDuration  time.Duration
}

func (h *hopLimitFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&h.minInputRate, "hop-min-input-rate", stageserver.DefaultMinInputRate, "a streamed /v1/run hop's input: once a frame has begun, each --hop-input-window must bring this many bytes per second of it, or its end, else the hop ends (408 body_timeout); pauses between frames are not counted; 0 = no bound")
	fs.DurationVar(&h.inputWindow, "hop-input-window", stageserver.DefaultInputWindow, "the wait over which --hop-min-input-rate is measured")
	fs.DurationVar(&h.maxDuration, "hop-max-duration", 0, "a streamed /v1/run hop's longest time (408 body_timeout while its input still comes, else 504 timeout); 0 = the pipeline's max_audio_seconds plus 5m (15m by default), negative = no bound")
}

// limits returns the stageserver.Limits the flags give.
func (h *hopLimitFlags) limits() (stageserver.Limits, error) {
	switch {
	case h.minInputRate < 0:
		return stageserver.Limits{}, errors.New("--hop-min-input-rate must not be negative (0 = no bound)")
	case h.inputWindow <= 0:
		return stageserver.Limits{}, errors.New("--hop-input-window must be positive")
	}
	l := stageserver.Limits{MinInputRate: h.minInputRate, InputWindow: h.inputWindow, MaxDuration: h.maxDuration}
	if h.minInputRate == 0 {
		l.MinInputRate = -1 // no bound
	}
	return l, nil
}
