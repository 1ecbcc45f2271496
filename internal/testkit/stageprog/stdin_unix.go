//go:build unix

package stageprog

// Standard input for Serve, read through the runtime's poller.

import (
	"os"
	"syscall"
)

// Stdin returns the process's standard input for Serve, non-blocking: a
// goroutine waiting for the next message then parks in Go's poller,
// rather than holding a thread in a read system call while the job the
// last message woke waits for that thread's processor. It falls back to
// os.Stdin.
func Stdin() *os.File {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "stdin")
}
