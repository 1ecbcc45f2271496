package external

// The timer of a job's silence (the stage's timeout); with no timeout, a
// channel that never fires.

import "time"

type silence struct {
	t *time.Timer
	c <-chan time.Time
}

func newSilence(d time.Duration) *silence {
	if d <= 0 {
		return &silence{}
	}
	t := time.NewTimer(d)
	return &silence{t: t, c: t.C}
}

func (s *silence) reset(d time.Duration) {
	if s.t != nil {
		s.t.Reset(d)
	}
}

func (s *silence) stop() {
	if s.t != nil {
		s.t.Stop()
	}
}
