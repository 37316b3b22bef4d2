//go:build ratelab_vsession

package main

import (
	"github.com/redis/go-redis/v9"

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// In the grader's session build (build tag ratelab_vsession) this command
// becomes the grader's virtual-time session when started as one
// (vsession.Run), for tasks 1 to 3 and 6: fake GPU servers with the
// compiled-in admission and limiters, the Redis one on the session's
// miniredis.
func init() {
	vsession.Run(vsession.Host{NewServer: virtualServer, NewRedisServer: virtualRedisServer})
}

// virtualServer is newServer for a session: the same admission and limiter.
// Mode redis needs the session's Redis (virtualRedisServer).
func virtualServer(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	srv, _, err := newServerOn(cfg, nil, opts...)
	return srv, err
}

// virtualRedisServer is newServer in mode redis for a session: the graded
// Redis limiter on the client rdb, which dials the session's Redis.
func virtualRedisServer(cfg fakegpu.Config, rdb *redis.Client, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	srv, _, err := newServerOn(cfg, rdb, opts...)
	return srv, err
}
