//go:build !linux

package sandbox

import "syscall"

func workerProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
