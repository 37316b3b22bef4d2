//go:build !unix

package redisenv

import "os/exec"

// ownGroup has no portable equivalent outside Unix: cancelling cmd's
// context kills the process itself.
func ownGroup(*exec.Cmd) {}

// killGroup kills cmd's process, if it was started.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
