//go:build unix

package grader

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own and makes
// cancelling it kill the whole group. `go test` and `go build` start
// children of their own (the compiler, the test binary); killing only the
// go command would leave a spinning test binary behind. A group of its own
// also keeps a terminal's Ctrl-C away from them: the grader ends them itself.
func ownProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
}

// killProcessGroup kills every process left in cmd's group. It is safe to
// call after cmd has ended (the group is then usually empty).
func killProcessGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}
