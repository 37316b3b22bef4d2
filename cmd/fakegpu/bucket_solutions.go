//go:build !ratelab_ex_bucket

package main

import (
	"ratelab/fakegpu"
	"ratelab/solutions/bucket"
)

func newLimiter(rate, burst float64) fakegpu.Limiter { return bucket.NewKeyedLimiter(rate, burst) }

const limiterFrom = "solutions/bucket"
