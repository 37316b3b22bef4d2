// Package counting is the adapter through which programs run task 8's four counting limiters:
// it takes the code from exercises/counting under the build tag ratelab_ex_counting,
// and from solutions/counting without it (see internal/layout). From names the
// tree it took.
package counting

import (
	"time"

	"ratelab/scenario"
)

// set adapts one tree's four constructors, whatever their concrete types,
// to a scenario.CountingSet.
func set[F, L, C, B scenario.CountingLimiter](
	fixed func(int, time.Duration) F, log func(int, time.Duration) L,
	counter func(int, time.Duration) C, bucket func(int, time.Duration, int) B,
	defaultBurst func(int) int,
) scenario.CountingSet {
	return scenario.CountingSet{
		Fixed:   func(limit int, window time.Duration) scenario.CountingLimiter { return fixed(limit, window) },
		Log:     func(limit int, window time.Duration) scenario.CountingLimiter { return log(limit, window) },
		Counter: func(limit int, window time.Duration) scenario.CountingLimiter { return counter(limit, window) },
		Bucket: func(limit int, window time.Duration, burst int) scenario.CountingLimiter {
			return bucket(limit, window, burst)
		},
		DefaultBurst: defaultBurst,
	}
}
