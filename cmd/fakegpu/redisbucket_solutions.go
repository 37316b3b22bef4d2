//go:build !ratelab_ex_redisbucket

package main

import (
	"context"

	"ratelab/fakegpu"
	"ratelab/internal/redisenv"
	"ratelab/solutions/redisbucket"
)

const redisFrom = "solutions/redisbucket"

// newRedisLimiter returns the reference Redis limiter on the server at url.
func newRedisLimiter(ctx context.Context, url string, rate, burst float64) (fakegpu.Limiter, func(), error) {
	rdb, _, cleanup, err := redisenv.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return redisbucket.New(rdb, rate, burst), cleanup, nil
}
