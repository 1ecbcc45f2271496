package engine

// Replay: how a stage declares that a job cut short by a lost replica can
// run again, on another replica, from the start of a unit of work.

// Replay is how a stage's jobs run again from a unit boundary after the
// replica running them was lost (see "Replay after a lost replica" in
// the package documentation).
type Replay struct {
	// Deterministic says that a job given its input again from the start
	// of a unit, on any replica, sends that unit's output and all that
	// follows in the very chunks a run that was never cut short sends:
	// the runtime then skips what was delivered already, and the output
	// goes on with no gap and no repeat. Otherwise the runtime drops the
	// output of the units that were delivered whole and delivers the
	// rest: the unit that the loss cut short is delivered again from its
	// start.
	Deterministic bool
}

// Replayer is implemented by engines that learn only once running whether
// their jobs can be replayed (a stage program that says so when it
// starts). Replay is called after Warm; ok false means they cannot. An
// engine that always can says so in its Driver's Replay instead, which
// also covers its replicas that run elsewhere (placement process or
// remote), where the runtime holds only a proxy of the engine.
type Replayer interface {
	Replay() (r Replay, ok bool)
}

// MaxReplayAhead is how many units of input a replayable engine may take
// beyond the unit whose output it is sending, when its input carries
// Spans: the runtime holds the rest back until the output catches up.
const MaxReplayAhead = 3

// UnitEnds reports whether c ends the output of its unit: the
// end-of-sentence mark of audio, or frames or segments, which hold a
// whole sentence each.
func UnitEnds(c Chunk) bool {
	return c.Audio != nil && c.Audio.EndOfSentence || c.Frames != nil || c.Segments != nil
}
