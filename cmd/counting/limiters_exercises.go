//go:build ratelab_ex_counting

package main

import (
	"time"

	"ratelab/exercises/counting"
	"ratelab/harness"
)

// tree names the tree the limiters come from.
const tree = "exercises/counting"

// limiters returns the learner's four limiters.
func limiters() harness.CountingSet {
	return harness.CountingSet{
		Fixed: func(limit int, window time.Duration) harness.CountingLimiter {
			return counting.NewFixedWindow(limit, window)
		},
		Log: func(limit int, window time.Duration) harness.CountingLimiter {
			return counting.NewSlidingLog(limit, window)
		},
		Counter: func(limit int, window time.Duration) harness.CountingLimiter {
			return counting.NewSlidingCounter(limit, window)
		},
		Bucket: func(limit int, window time.Duration, burst int) harness.CountingLimiter {
			return counting.NewTokenBucket(limit, window, burst)
		},
		DefaultBurst: counting.DefaultBurst,
	}
}
