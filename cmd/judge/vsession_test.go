//go:build ratelab_vsession

package main

import (
	"testing"

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// TestVirtualSession is the grader's virtual-time session for task 5 (see
// internal/vsession): the judge's strategies with the graded polite client
// against the fake Messages API. It is built only with the tag
// ratelab_vsession.
func TestVirtualSession(t *testing.T) {
	vsession.Main(t, vsession.Host{NewServer: fakegpu.New, NewPolite: newPolite, Client: clientFrom})
}
