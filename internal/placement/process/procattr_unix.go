//go:build unix

package process

import "syscall"

// sysProcAttr puts a worker in a process group of its own, so the signals
// a terminal sends to the foreground group (Ctrl-C) reach only the parent,
// which stops its workers in order.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
