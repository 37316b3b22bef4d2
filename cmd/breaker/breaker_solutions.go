//go:build !ratelab_ex_breaker

package main

import (
	"time"

	"ratelab/scenario"
	"ratelab/solutions/breaker"
)

// newBreaker returns the reference circuit breaker.
func newBreaker(window int, ratio float64, minCalls int, cooldown time.Duration, halfOpen int) scenario.Breaker {
	return breaker.NewBreaker(breaker.BreakerSettings{
		Window: window, FailureRatio: ratio, MinCalls: minCalls, Cooldown: cooldown, HalfOpenMax: halfOpen,
	})
}
