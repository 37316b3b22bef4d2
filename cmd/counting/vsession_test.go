//go:build ratelab_vsession

package main

import (
	"testing"

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// TestVirtualSession is the grader's virtual-time session for task 8 (see
// internal/vsession): the measurements of the graded limiters that take
// time. It is built only with the tag ratelab_vsession.
func TestVirtualSession(t *testing.T) {
	set := limiters()
	vsession.Main(t, vsession.Host{NewServer: fakegpu.New, Counting: &set, CountingTree: tree})
}
