//go:build !unix

package subprocess

import "syscall"

// SysProcAttr is nil where process groups are not supported.
func SysProcAttr() *syscall.SysProcAttr { return nil }
