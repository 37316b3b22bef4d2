//go:build !ratelab_ex_counting

package main

import (
	"ratelab/scenario"
	"ratelab/solutions/counting"
)

// tree names the tree the limiters come from.
const tree = "solutions/counting"

// limiters returns the reference four limiters.
func limiters() scenario.CountingSet {
	return countingSet(counting.NewFixedWindow, counting.NewSlidingLog, counting.NewSlidingCounter, counting.NewTokenBucket, counting.DefaultBurst)
}
