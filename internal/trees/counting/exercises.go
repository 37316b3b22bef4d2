//go:build ratelab_ex_counting

package counting

import (
	tree "ratelab/exercises/counting"
	"ratelab/scenario"
)

// From is the tree this adapter takes the code from.
const From = "exercises/counting"

// Limiters returns the tree's four limiters.
func Limiters() scenario.CountingSet {
	return set(tree.NewFixedWindow, tree.NewSlidingLog, tree.NewSlidingCounter, tree.NewTokenBucket, tree.DefaultBurst)
}
