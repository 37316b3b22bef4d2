//go:build ratelab_ex_redisbucket

package redisbucket

import (
	"github.com/redis/go-redis/v9"

	tree "ratelab/exercises/redisbucket"
	"ratelab/fakegpu"
)

// From is the tree this adapter takes the code from.
const From = "exercises/redisbucket"

// NewLimiter returns the tree's Redis limiter on the client rdb: rate
// tokens a second per key, at most burst each, shared by every worker of
// that Redis.
func NewLimiter(rdb *redis.Client, rate, burst float64) fakegpu.Limiter {
	return tree.New(rdb, rate, burst)
}
