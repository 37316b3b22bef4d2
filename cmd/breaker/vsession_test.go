//go:build ratelab_vsession

package main

import (
	"testing"

	"ratelab/fakegpu"
	"ratelab/harness"
	"ratelab/internal/vsession"
)

// TestVirtualSession is the grader's virtual-time session for task 7 (see
// internal/vsession): the dependency scenario with the graded breaker. It
// is built only with the tag ratelab_vsession.
func TestVirtualSession(t *testing.T) {
	vsession.Main(t, vsession.Host{NewServer: fakegpu.New, NewBreaker: scenarioBreaker})
}

// scenarioBreaker is newBreaker for a session's settings.
func scenarioBreaker(b vsession.Breaker) harness.Breaker {
	return newBreaker(b.Window, b.FailureRatio, b.MinCalls, b.Cooldown, b.HalfOpenMax)
}
