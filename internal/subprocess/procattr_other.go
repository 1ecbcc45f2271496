//go:build !unix

package subprocess

// No process group where the platform has none.

import "syscall"

// SysProcAttr is nil where process groups are not supported.
func SysProcAttr() *syscall.SysProcAttr { return nil }
