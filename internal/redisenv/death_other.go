//go:build unix && !linux

package redisenv

import "syscall"

// deathSignal has no equivalent outside Linux; the owner stops the server
// itself.
func deathSignal(*syscall.SysProcAttr) {}
