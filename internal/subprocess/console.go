package subprocess

// A child process's output: split into lines, each forwarded with a
// prefix naming the child (within a limit of bytes per second), the last
// ones kept for an error message.

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// TailLines is how many of a child's last output lines a Console keeps for
// the error that reports its end.
const TailLines = 10

// MaxLine bounds a line's length; a longer run without a newline is cut
// into lines of this size.
const MaxLine = 64 << 10

// The bound on what a child (an external stage's program, a worker
// process) writes to the server's log through its Console: a token bucket
// of LogRate bytes per second, holding LogBurst. Past it lines are
// dropped, counted in a line when the log takes lines again, and still
// kept for the error that reports the child's end.
const (
	LogRate  = 64 << 10
	LogBurst = 256 << 10
)

// Console forwards a child's output, a line at a time and prefixed with
// the child's name, to a writer, and keeps the last lines. With a limit
// (Limit), lines past it are kept but not forwarded, and the next line
// forwarded is preceded by a count of the bytes dropped. It is safe for
// concurrent use.
type Console struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	// tail is a ring of the last lines, reused: a child that floods its
	// output costs a copy per line, not an allocation.
	tail  [TailLines][]byte
	next  int // where the next line goes in tail
	lines int // lines kept in tail, up to TailLines

	// The limit: a bucket of tokens (bytes written), refilled at rate per
	// second up to burst; rate 0 means none.
	rate, burst float64
	tokens      float64
	filled      time.Time // when tokens was last refilled
	dropped     int64     // bytes dropped since the last line forwarded
	dropping    bool      // the last line was dropped
	what        string    // what the lines are, for the count of those dropped
	now         func() time.Time
}

// NewConsole returns a Console that writes to w, each line after prefix,
// without a limit.
func NewConsole(w io.Writer, prefix string) *Console {
	return &Console{w: w, prefix: prefix, now: time.Now}
}

// Limit bounds what the Console forwards to rate bytes per second, with
// bursts of up to burst bytes (each line counted with its prefix and
// newline); rate 0 or less means no bound. The bucket starts full. What
// names the lines in the count of those dropped ("standard error").
func (c *Console) Limit(what string, rate, burst int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.what = what
	c.rate, c.burst = float64(max(rate, 0)), float64(max(burst, 0))
	c.tokens, c.filled = c.burst, c.now()
}

// SetPrefix changes the prefix of later lines (once the child's pid is
// known, say).
func (c *Console) SetPrefix(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prefix = p
}

// Line forwards one line, b without its newline, unless it is past the
// limit, and keeps it.
func (c *Console) Line(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tail[c.next] = append(c.tail[c.next][:0], b...)
	c.next = (c.next + 1) % TailLines
	c.lines = min(c.lines+1, TailLines)
	if !c.take(len(c.prefix) + len(b) + 1) {
		c.dropped += int64(len(b)) + 1
		return
	}
	c.reportDropped()
	_, _ = fmt.Fprintf(c.w, "%s%s\n", c.prefix, b)
}

// take reports whether n bytes are within the limit, and spends them.
// Once a line was dropped, lines go through again only when the bucket
// holds a quarter of its burst: a flood then reaches the log as runs of
// lines, each after one count of those dropped, rather than as a count
// between every two lines.
func (c *Console) take(n int) bool {
	if c.rate <= 0 {
		return true
	}
	now := c.now()
	c.tokens = min(c.burst, c.tokens+now.Sub(c.filled).Seconds()*c.rate)
	c.filled = now
	need := float64(n)
	if c.dropping {
		need = max(need, c.burst/4)
	}
	if c.tokens < need {
		c.dropping = true
		return false
	}
	c.tokens -= float64(n)
	c.dropping = false
	return true
}

// reportDropped writes how many bytes were dropped since the last line
// forwarded, if any, and spends its own bytes.
func (c *Console) reportDropped() {
	if c.dropped == 0 {
		return
	}
	n, _ := fmt.Fprintf(c.w, "%s%d bytes of %s dropped (past the limit of %.0f bytes per second)\n", c.prefix, c.dropped, c.what, c.rate)
	c.tokens -= float64(n)
	c.dropped = 0
}

// Note forwards a line of the owner's own about the child (that it was
// lost, say), whatever the limit, after the count of bytes dropped. It is
// not kept.
func (c *Console) Note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reportDropped()
	_, _ = fmt.Fprintf(c.w, "%s%s\n", c.prefix, s)
}

// Flush writes the count of bytes dropped since the last line forwarded,
// if any: once the child's output has ended, it comes with no next line.
func (c *Console) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reportDropped()
}

// Last returns the last lines, indented, for an error message; "" when
// there are none.
func (c *Console) Last() string {
	tail := c.Tail()
	if len(tail) == 0 {
		return ""
	}
	return "; its last output:\n    " + strings.Join(tail, "\n    ")
}

// Tail returns the last lines kept, oldest first.
func (c *Console) Tail() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, c.lines)
	for i := range c.lines {
		out = append(out, string(c.tail[(c.next-c.lines+i+TailLines)%TailLines]))
	}
	return out
}

// LineWriter splits one output stream of a child into lines, handing each
// to OnLine, without its newline (and a carriage return before it). One
// goroutine writes to it (the one os/exec copies the stream with); Flush
// runs after that goroutine has finished.
type LineWriter struct {
	OnLine func([]byte)
	buf    []byte
}

// Write implements io.Writer.
func (l *LineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			for len(l.buf) >= MaxLine {
				l.OnLine(l.buf[:MaxLine])
				l.buf = append(l.buf[:0], l.buf[MaxLine:]...)
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.OnLine(bytes.TrimSuffix(l.buf, []byte("\r")))
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Flush hands on a last line that has no newline.
func (l *LineWriter) Flush() {
	if len(l.buf) > 0 {
		l.OnLine(l.buf)
		l.buf = nil
	}
}
