//go:build !unix

package worker

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
