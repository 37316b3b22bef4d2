//go:build !unix

package grader

import "os/exec"

// ownProcessGroup has no portable equivalent outside Unix: cancelling cmd
// kills the process itself, as exec.CommandContext does by default.
func ownProcessGroup(*exec.Cmd) {}

// killProcessGroup does nothing outside Unix.
func killProcessGroup(*exec.Cmd) error { return nil }
