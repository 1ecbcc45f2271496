//go:build !unix

package process

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
