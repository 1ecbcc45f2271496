//go:build !race

package ppocr

const raceEnabled = false
