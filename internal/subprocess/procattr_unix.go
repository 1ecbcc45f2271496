//go:build unix

package subprocess

// A process group of the child's own, on Unix.

import "syscall"

// SysProcAttr puts a child in a process group of its own, so the signals
// a terminal sends to the foreground group (Ctrl-C) reach only the parent,
// which stops its children in order.
func SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
