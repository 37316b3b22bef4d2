//go:build ratelab_vsession

package main

import (
	"errors"
	"testing"

	"ratelab/fakegpu"
	"ratelab/internal/vsession"
)

// TestVirtualSession is the grader's virtual-time session for tasks 1 to 3
// (see internal/vsession): fake GPU servers with the compiled-in admission
// and limiter. It is built only with the tag ratelab_vsession.
func TestVirtualSession(t *testing.T) {
	vsession.Main(t, vsession.Host{NewServer: virtualServer})
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
