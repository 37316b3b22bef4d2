package bucket

import (
	"testing"

	"ratelab/internal/suites/bucketsuite"
)

// TestBucket runs the shared task 3 suite on this package. Do not edit it:
// the same checks grade the exercise and guard the reference solution.
func TestBucket(t *testing.T) {
	bucketsuite.RunWithZero(t,
		func(rate, burst float64) bucketsuite.Bucket { return NewTokenBucket(rate, burst) },
		func(rate, burst float64) bucketsuite.Keyed { return NewKeyedLimiter(rate, burst) },
		func() bucketsuite.Bucket { return new(TokenBucket) },
		func() bucketsuite.Keyed { return new(KeyedLimiter) },
	)
}
