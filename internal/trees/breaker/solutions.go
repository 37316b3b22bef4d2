//go:build !ratelab_ex_breaker

package breaker

import (
	"ratelab/scenario"
	tree "ratelab/solutions/breaker"
)

// From is the tree this adapter takes the code from.
const From = "solutions/breaker"

// New returns the tree's breaker configured as s.
func New(s Settings) scenario.Breaker {
	return tree.NewBreaker(tree.BreakerSettings{
		Window: s.Window, FailureRatio: s.FailureRatio, MinCalls: s.MinCalls, Cooldown: s.Cooldown, HalfOpenMax: s.HalfOpenMax,
	})
}
