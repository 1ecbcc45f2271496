package cli

import (
	"slices"
	"testing"

	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/process"
	"github.com/omnistage/omnistage/internal/turns"
)

// TestWorkersFollowTurns: the workers of a server that runs every unit of
// work at once are told to as well; those of one that takes turns keep
// their default, turns of their own.
func TestWorkersFollowTurns(t *testing.T) {
	for _, tc := range []struct {
		sched *turns.Scheduler
		flags []string
	}{
		{nil, []string{"--turns=false"}},
		{turns.New(2), nil},
	} {
		opts := Env{}.orchestratorOptions(&pipeline.Config{}, nil, nil, tc.sched)
		flags := opts.Placements[pipeline.PlacementProcess].(*process.Placement).Flags
		if opts.Turns != tc.sched || !slices.Equal(flags, tc.flags) {
			t.Errorf("scheduler %p: the orchestrator's %p, worker flags %q, want %q", tc.sched, opts.Turns, flags, tc.flags)
		}
	}
}
