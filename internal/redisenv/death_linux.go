package redisenv

import "syscall"

// deathSignal makes the kernel kill the child when its parent dies, so a
// private server never outlives a killed grader or test binary.
func deathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
