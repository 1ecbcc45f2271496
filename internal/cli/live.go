package cli

// omnistage serve's flags of live input (the speech stream's sessions,
// Wyoming's streams): how many sessions, and how much of each pipeline
// they may hold.

import (
	"flag"
	"fmt"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/sessions"
)

// liveFlags are serve's flags of live input.
type liveFlags struct {
	maxSessions int
	frac        float64
	// share is the one Share of the HTTP API's and the Wyoming server's
	// live input, made by check.
	share *sessions.Share
}

func (l *liveFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&l.maxSessions, "max-sessions", api.DefaultStreamMaxSessions, "speech stream (WebSocket) sessions open at once, apart from --max-conns; past it, a new one takes the place of the session with no utterance in progress for the longest (closed with 1013), and is refused (503) while every one is speaking")
	fs.Float64Var(&l.frac, "live-share", sessions.DefaultLiveShare, "the share of each pipeline's admission slots (deploy.max_inflight) that live input, whose text arrives as it is spoken (speech stream utterances, Wyoming streams), may hold at once; past it a live request is refused (overloaded), leaving the rest to requests whose text is whole")
}

// check checks the flags and makes the share.
func (l *liveFlags) check() error {
	if l.maxSessions <= 0 {
		return fmt.Errorf("--max-sessions %d: want at least 1", l.maxSessions)
	}
	share, err := sessions.NewShare(l.frac)
	if err != nil {
		return fmt.Errorf("--live-share: %w", err)
	}
	l.share = share
	return nil
}
