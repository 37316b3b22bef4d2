//go:build !unix && !windows

package fakegpu

import "time"

// processCPU returns the CPU time the process has used since it started,
// as the Go runtime estimates it, where the system has no call for it.
func processCPU() time.Duration { return runtimeCPU() }
