//go:build unix

package fakegpu

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, the process has used
// since it started, as the operating system counts it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return runtimeCPU()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
