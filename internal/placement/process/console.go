package process

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// tailLines is how many of a worker's last output lines are kept for the
// error that reports its failure to start.
const tailLines = 10

// maxLine bounds a line's length; a longer run without a newline is cut
// into lines of this size.
const maxLine = 64 << 10

// console forwards a worker's output, a line at a time and prefixed with
// the replica's name, to a writer, and keeps the last lines.
type console struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	tail   []string
}

func (c *console) setPrefix(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prefix = p
}

func (c *console) line(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = fmt.Fprintf(c.w, "%s%s\n", c.prefix, b)
	if len(c.tail) == tailLines {
		c.tail = append(c.tail[:0], c.tail[1:]...)
	}
	c.tail = append(c.tail, string(b))
}

// last returns the last lines, indented, for an error message; "" when
// there are none.
func (c *console) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) == 0 {
		return ""
	}
	return "; its last output:\n    " + strings.Join(c.tail, "\n    ")
}

// lineWriter splits one output stream of a worker into lines, handing each
// to onLine. One goroutine writes to it (the one os/exec copies the stream
// with); flush runs after that goroutine has finished.
type lineWriter struct {
	buf    []byte
	onLine func([]byte)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			for len(l.buf) >= maxLine {
				l.onLine(l.buf[:maxLine])
				l.buf = append(l.buf[:0], l.buf[maxLine:]...)
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.onLine(bytes.TrimSuffix(l.buf, []byte("\r")))
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush hands on a last line that has no newline.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		l.onLine(l.buf)
		l.buf = nil
	}
}
