//go:build !ratelab_ex_bucket

package bucket

import (
	"ratelab/fakegpu"
	tree "ratelab/solutions/bucket"
)

// From is the tree this adapter takes the code from.
const From = "solutions/bucket"

// NewLimiter returns the tree's keyed limiter: rate tokens a second per
// key, at most burst each.
func NewLimiter(rate, burst float64) fakegpu.Limiter { return tree.NewKeyedLimiter(rate, burst) }
