//go:build unix

package harness

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the soft limit on open files toward the hard limit
// (the lesson's `ulimit -n 8192`), so that need sockets can be open at once.
// It returns the soft limit in force afterwards, and an error saying what to
// do if that is still below need.
func RaiseFileLimit(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur < need && lim.Cur < lim.Max {
		want := lim
		want.Cur = min(max(need, 8192), lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			lim = want
		}
	}
	if lim.Cur < need {
		return lim.Cur, fmt.Errorf("this flood can hold about %d sockets open at once, but the open-file limit is %d (hard limit %d): run `ulimit -n %d` in this shell first, or lower the rate or the client timeout", need, lim.Cur, lim.Max, need)
	}
	return lim.Cur, nil
}
