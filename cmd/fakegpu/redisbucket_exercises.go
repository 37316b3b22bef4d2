//go:build ratelab_ex_redisbucket

package main

import (
	"github.com/redis/go-redis/v9"

	"ratelab/exercises/redisbucket"
	"ratelab/fakegpu"
)

const redisFrom = "exercises/redisbucket"

// redisLimiter returns the learner's Redis limiter on the client rdb.
func redisLimiter(rdb *redis.Client, rate, burst float64) fakegpu.Limiter {
	return redisbucket.New(rdb, rate, burst)
}
