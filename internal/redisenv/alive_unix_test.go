//go:build unix

package redisenv

import "syscall"

// alive reports whether process pid exists: signal 0 checks without sending.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
