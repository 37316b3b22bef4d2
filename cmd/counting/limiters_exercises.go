//go:build ratelab_ex_counting

package main

import (
	"ratelab/exercises/counting"
	"ratelab/scenario"
)

// tree names the tree the limiters come from.
const tree = "exercises/counting"

// limiters returns the learner's four limiters.
func limiters() scenario.CountingSet {
	return countingSet(counting.NewFixedWindow, counting.NewSlidingLog, counting.NewSlidingCounter, counting.NewTokenBucket, counting.DefaultBurst)
}
