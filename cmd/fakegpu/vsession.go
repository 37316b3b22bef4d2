//go:build ratelab_vsession

package main

import (
	"errors"
	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// In the grader's session build (build tag ratelab_vsession) this command
// becomes the grader's virtual-time session when started as one
// (vsession.Run), for tasks 1 to 3: fake GPU servers with the compiled-in
// admission and limiter.
func init() {
	vsession.Run(vsession.Host{NewServer: virtualServer})
}

// virtualServer is newServer for a session: the same admission and limiter,
// without Redis (a shared store is not simulated yet).
func virtualServer(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode == fakegpu.ModeRedis {
		return nil, errors.New("mode redis runs on the wall clock only")
	}
	srv, _, _, err := newServer(cfg, opts...)
	return srv, err
}
