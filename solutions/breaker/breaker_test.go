package breaker

import (
	"testing"

	"ratelab/internal/suites/breakersuite"
)

// TestBreaker runs the shared task 7 suite on this package. Do not edit it:
// the same checks grade the exercise and guard the reference solution.
func TestBreaker(t *testing.T) {
	breakersuite.Run(t, breakersuite.Impl{
		New: func(s breakersuite.Settings) breakersuite.Breaker { return NewBreaker(BreakerSettings(s)) },
		State: func(b breakersuite.Breaker) breakersuite.State {
			return breakersuite.State(b.(*Breaker).State())
		},
		String:  func(s breakersuite.State) string { return State(s).String() },
		ErrOpen: ErrOpen,
	})
}
