//go:build unix

package subprocess

// A process group of the child's own, on Unix.

import (
	"errors"
	"os"
	"syscall"
)

// SysProcAttr puts a child in a process group of its own, so the signals
// a terminal sends to the foreground group (Ctrl-C) reach only the parent,
// which stops its children in order.
func SysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Terminate asks p's process group (SysProcAttr made one) to stop: SIGTERM.
func Terminate(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }

// Kill kills p's process group: SIGKILL, so that what the child started
// goes with it. The group outlives p's exit while a process started in
// it lives: Kill after Wait kills those.
func Kill(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	if p.Pid <= 0 {
		// Released (-1): -p.Pid would name init, or every process.
		return errors.New("process released")
	}
	return syscall.Kill(-p.Pid, sig)
}
