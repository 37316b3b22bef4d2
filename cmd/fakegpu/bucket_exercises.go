//go:build ratelab_ex_bucket

package main

import (
	"ratelab/exercises/bucket"
	"ratelab/fakegpu"
)

func newLimiter(rate, burst float64) fakegpu.Limiter { return bucket.NewKeyedLimiter(rate, burst) }

const limiterFrom = "exercises/bucket"
