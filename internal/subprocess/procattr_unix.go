//go:build unix

package subprocess

// A process group of the child's own, on Unix.

import (
	"os"
	"syscall"
)

// SysProcAttr puts a child in a process group of its own, so the signals
// a terminal sends to the foreground group (Ctrl-C) reach only the parent,
// which stops its children in order.
func SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Terminate asks p's process group (SysProcAttr made one) to stop: SIGTERM.
func Terminate(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }

// Kill kills p's process group: SIGKILL, so that what the child started
// goes with it.
func Kill(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
