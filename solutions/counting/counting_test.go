package counting

import (
	"testing"
	"time"

	"ratelab/internal/suites/countingsuite"
)

// TestCounting runs the shared task 8 suite on this package. Do not edit it:
// the same checks grade the exercise and guard the reference solution.
func TestCounting(t *testing.T) {
	countingsuite.Run(t, countingsuite.Impl{
		FixedWindow:    func(limit int, window time.Duration) countingsuite.Limiter { return NewFixedWindow(limit, window) },
		SlidingLog:     func(limit int, window time.Duration) countingsuite.Limiter { return NewSlidingLog(limit, window) },
		SlidingCounter: func(limit int, window time.Duration) countingsuite.Limiter { return NewSlidingCounter(limit, window) },
		TokenBucket: func(limit int, window time.Duration, burst int) countingsuite.Limiter {
			return NewTokenBucket(limit, window, burst)
		},
		DefaultBurst: DefaultBurst,
	})
}
