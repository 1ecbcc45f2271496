package stagecheck

// The programs' standard error: passed on a line at a time, the last lines
// of the current case kept for its result.

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/omnistage/omnistage/internal/subprocess"
)

// stderrLines is how many of the programs' last lines a failed case
// reports.
const stderrLines = 5

// lines passes on the lines the programs write on their standard error to
// w (when set), and keeps the last ones written since the current case
// began. It is safe for concurrent use.
type lines struct {
	mu   sync.Mutex
	w    io.Writer
	kept []string
}

// reset forgets the lines kept: a case begins.
func (l *lines) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kept = nil
}

// last returns the last lines kept.
func (l *lines) last() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.kept)
}

// add passes on line after prefix, and keeps line; l.mu is held.
func (l *lines) add(prefix, line string) {
	if l.w != nil {
		fmt.Fprintf(l.w, "%s%s\n", prefix, line)
	}
	if len(l.kept) == stderrLines {
		l.kept = append(l.kept[:0], l.kept[1:]...)
	}
	l.kept = append(l.kept, line)
}

// program returns the standard error of a program the check runs by
// hand, each line passed on after prefix.
func (l *lines) program(prefix string) *subprocess.LineWriter {
	return &subprocess.LineWriter{OnLine: func(b []byte) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.add(prefix, string(b))
	}}
}

// engine returns the writer of an external.Engine's Config.Stderr. Its
// lines come prefixed with the replica, which is passed on and not kept;
// the engine's own note of a program's loss is not the program's and is
// not kept either (the case's result says it).
func (l *lines) engine() io.Writer {
	return &subprocess.LineWriter{OnLine: func(b []byte) {
		l.mu.Lock()
		defer l.mu.Unlock()
		prefix := enginePrefix.FindString(string(b))
		line := string(b[len(prefix):])
		if strings.HasPrefix(line, engineNote) {
			if l.w != nil {
				fmt.Fprintf(l.w, "%s\n", b)
			}
			return
		}
		l.add(prefix, line)
	}}
}

// enginePrefix is what package external puts before each line of a
// program's, and engineNote starts a line of its own about the program.
var (
	enginePrefix = regexp.MustCompile(`^stage [^ ]+( \(pid \d+\))?: `)
	engineNote   = "lost: "
)
