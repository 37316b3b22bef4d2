//go:build ratelab_ex_bucket

package bucket

import (
	tree "ratelab/exercises/bucket"
	"ratelab/fakegpu"
)

// From is the tree this adapter takes the code from.
const From = "exercises/bucket"

// NewLimiter returns the tree's keyed limiter: rate tokens a second per
// key, at most burst each.
func NewLimiter(rate, burst float64) fakegpu.Limiter { return tree.NewKeyedLimiter(rate, burst) }
