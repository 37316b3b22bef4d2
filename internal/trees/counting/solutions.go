//go:build !ratelab_ex_counting

package counting

import (
	"ratelab/scenario"
	tree "ratelab/solutions/counting"
)

// From is the tree this adapter takes the code from.
const From = "solutions/counting"

// Limiters returns the tree's four limiters.
func Limiters() scenario.CountingSet {
	return set(tree.NewFixedWindow, tree.NewSlidingLog, tree.NewSlidingCounter, tree.NewTokenBucket, tree.DefaultBurst)
}
