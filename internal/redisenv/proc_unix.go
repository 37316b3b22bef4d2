//go:build unix

package redisenv

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that a terminal's
// Ctrl-C does not reach it before its owner is ready to stop it, and makes
// cancelling cmd's context kill the whole group.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	deathSignal(cmd.SysProcAttr)
	cmd.Cancel = func() error { killGroup(cmd); return nil }
}

// killGroup kills every process in cmd's group, if it was started.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
