//go:build !unix

package subprocess

// No process group where the platform has none.

import (
	"os"
	"syscall"
)

// SysProcAttr is nil where process groups are not supported.
func SysProcAttr() *syscall.SysProcAttr { return nil }

// Terminate stops p: without process groups, by killing it.
func Terminate(p *os.Process) error { return p.Kill() }

// Kill kills p.
func Kill(p *os.Process) error { return p.Kill() }
