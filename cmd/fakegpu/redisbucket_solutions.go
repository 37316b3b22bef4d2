//go:build !ratelab_ex_redisbucket

package main

import (
	"github.com/redis/go-redis/v9"

	"ratelab/fakegpu"
	"ratelab/solutions/redisbucket"
)

const redisFrom = "solutions/redisbucket"

// redisLimiter returns the reference Redis limiter on the client rdb.
func redisLimiter(rdb *redis.Client, rate, burst float64) fakegpu.Limiter {
	return redisbucket.New(rdb, rate, burst)
}
