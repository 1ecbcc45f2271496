package subprocess

// A child process's output: split into lines, each forwarded with a
// prefix naming the child, the last ones kept for an error message.

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// TailLines is how many of a child's last output lines a Console keeps for
// the error that reports its end.
const TailLines = 10

// MaxLine bounds a line's length; a longer run without a newline is cut
// into lines of this size.
const MaxLine = 64 << 10

// Console forwards a child's output, a line at a time and prefixed with
// the child's name, to a writer, and keeps the last lines. It is safe for
// concurrent use.
type Console struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	tail   []string
}

// NewConsole returns a Console that writes to w, each line after prefix.
func NewConsole(w io.Writer, prefix string) *Console {
	return &Console{w: w, prefix: prefix}
}

// SetPrefix changes the prefix of later lines (once the child's pid is
// known, say).
func (c *Console) SetPrefix(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prefix = p
}

// Line forwards one line, b without its newline, and keeps it.
func (c *Console) Line(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = fmt.Fprintf(c.w, "%s%s\n", c.prefix, b)
	if len(c.tail) == TailLines {
		c.tail = append(c.tail[:0], c.tail[1:]...)
	}
	c.tail = append(c.tail, string(b))
}

// Last returns the last lines, indented, for an error message; "" when
// there are none.
func (c *Console) Last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) == 0 {
		return ""
	}
	return "; its last output:\n    " + strings.Join(c.tail, "\n    ")
}

// Tail returns the last lines kept.
func (c *Console) Tail() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.tail...)
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
