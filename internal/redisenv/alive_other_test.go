//go:build !unix

package redisenv

import "os"

// alive reports whether process pid exists. Where there are no signals
// (Windows), opening the process is the test: it fails once it has gone.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
