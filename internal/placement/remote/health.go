package remote

// A replica's readiness at start-up and its health checks afterwards.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/omnistage/omnistage/internal/hop"
)

// Warm waits until the stage server's /ready answers 200, for at most the
// warm timeout, then starts the replica's health checks.
func (e *Engine) Warm(parent context.Context) error {
	ctx, cancel := context.WithTimeout(parent, e.cfg.Link.WarmTimeout)
	defer cancel()
	pause := 20 * time.Millisecond
	for {
		// Each check has its own bound: a host cut off (its packets dropped,
		// not refused) must not hold the next check, once it is back.
		pctx, pcancel := context.WithTimeout(ctx, e.probeTimeout())
		err := e.cfg.Client.Probe(pctx, e.endpoint, "/ready")
		pcancel()
		if err == nil {
			break
		}
		var he *hop.HTTPError
		if errors.As(err, &he) && !he.Temporary() {
			return fmt.Errorf("remote: %s: /ready: %w (is it an omnistage stage server?)", e.where, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if parent.Err() != nil {
				return fmt.Errorf("remote: %s not ready: %w", e.where, parent.Err())
			}
			return fmt.Errorf("remote: %s not ready after %s: %w", e.where, e.cfg.Link.WarmTimeout, err)
		}
		pause = min(2*pause, time.Second)
	}
	e.watch.Do(func() {
		e.wg.Add(1)
		go e.healthLoop()
	})
	return nil
}

// minProbeTimeout is the least time a health check waits for its answer,
// however short the interval: a loaded host answers /health in far less,
// and a host cut off is found within this plus the interval.
const minProbeTimeout = 500 * time.Millisecond

// probeTimeout bounds one /ready or /health check: the health interval,
// and at least minProbeTimeout.
func (e *Engine) probeTimeout() time.Duration {
	return max(e.cfg.Link.HealthInterval, minProbeTimeout)
}

// healthLoop checks /health until Close, and loses the replica after too
// many failures in a row.
func (e *Engine) healthLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.Link.HealthInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.Lost():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(e.ctx, e.probeTimeout())
		err := e.cfg.Client.Probe(ctx, e.endpoint, "/health")
		cancel()
		if e.ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		if failures++; failures >= e.cfg.Link.HealthFailures {
			e.Mark(fmt.Errorf("%d health checks of %s failed in a row, the last: %w", failures, e.where, err))
			return
		}
	}
}
