//go:build ratelab_vsession

package main

import (
	"ratelab/fakegpu"
	"ratelab/internal/vsession"
	"ratelab/scenario"
)

// In the grader's session build (build tag ratelab_vsession) this command
// becomes the grader's virtual-time session when started as one
// (vsession.Run), for task 7: the dependency scenario with the graded
// breaker.
func init() {
	vsession.Run(vsession.Host{NewServer: fakegpu.New, NewBreaker: scenarioBreaker})
}

// scenarioBreaker is newBreaker for a session's settings.
func scenarioBreaker(b vsession.Breaker) scenario.Breaker {
	return newBreaker(b.Window, b.FailureRatio, b.MinCalls, b.Cooldown, b.HalfOpenMax)
}
