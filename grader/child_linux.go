package grader

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the child if the grader dies,
// so no server outlives a crashed or killed grade.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
