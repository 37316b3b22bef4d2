//go:build exercises

package shedding_test

import (
	"testing"

	"ratelab/exercises/shedding"
	"ratelab/internal/suites/sheddingsuite"
)

// TestShedding runs task 2's shared suite. Don't edit it: the same checks run
// against the exercise and the reference.
func TestShedding(t *testing.T) {
	sheddingsuite.Run(t, sheddingsuite.Impl{
		Admit:             shedding.Admit,
		RetryAfterSeconds: shedding.RetryAfterSeconds,
		DrainTime:         shedding.DrainTime,
	})
}
