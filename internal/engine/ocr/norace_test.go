//go:build !race

package ocr_test

const raceEnabled = false
