//go:build race

package ocr_test

// raceEnabled says the race detector is on: it slows Go code several
// times over, so timings mean nothing.
const raceEnabled = true
