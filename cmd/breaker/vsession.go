//go:build ratelab_vsession

package main

import (
	"ratelab/fakegpu"
	"ratelab/internal/trees/breaker"
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

// scenarioBreaker is the breaker for a session's settings.
func scenarioBreaker(b vsession.Breaker) scenario.Breaker {
	return breaker.New(breaker.Settings{Window: b.Window, FailureRatio: b.FailureRatio, MinCalls: b.MinCalls, Cooldown: b.Cooldown, HalfOpenMax: b.HalfOpenMax})
}
