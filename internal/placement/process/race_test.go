//go:build race

package process_test

// raceEnabled says the race detector is on: it slows the Go code of a
// hop several times, so a request takes several times as long.
const raceEnabled = true
