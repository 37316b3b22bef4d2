//go:build exercises

package redisbucket

import (
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"ratelab/internal/suites/redisbucketsuite"
)

// TestRedisBucket runs the shared task 6 suite on this package. Do not edit
// it: the same checks grade the exercise and guard the reference solution.
func TestRedisBucket(t *testing.T) {
	redisbucketsuite.Run(t, source,
		func(rdb *redis.Client, rate, burst float64, log *slog.Logger) redisbucketsuite.Limiter {
			return New(rdb, rate, burst, WithLogger(log))
		},
	)
}
