//go:build unix

package stageprog

// Standard input and output for Serve, read and written through the
// runtime's poller.

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

// Stdout returns the process's standard output for Serve, non-blocking,
// so that package stageproto writes it with raw system calls, as it reads
// Stdin (stageproto.NewWriter). It falls back to os.Stdout. Once it has
// been called, the program must not write os.Stdout itself: a write to a
// full pipe would fail rather than wait.
func Stdout() *os.File {
	if err := syscall.SetNonblock(1, true); err != nil {
		return os.Stdout
	}
	return os.NewFile(1, "stdout")
}
