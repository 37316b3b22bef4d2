//go:build ratelab_vsession

package main

import (
	"ratelab/fakegpu"
	"ratelab/internal/trees/retry"
	"ratelab/internal/trees/shedding"
	"ratelab/internal/vsession"
	"ratelab/scenario"
)

// In the grader's session build (build tag ratelab_vsession) this command
// becomes the grader's virtual-time session when started as one
// (vsession.Run), for task 4: the storms and the amplifier with the graded
// retry loop, against a fake GPU server in the same bubble.
func init() {
	vsession.Run(vsession.Host{NewServer: stormServer, NewCall: stormCall})
}

// stormServer is the fake GPU the storms and the amplifier call: shedding
// or unprotected, as the grader's wall-clock servers.
func stormServer(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
	if cfg.Mode != fakegpu.ModeNone {
		opts = append(opts, fakegpu.WithAdmission(shedding.Admission))
	}
	return fakegpu.New(cfg, opts...)
}

// stormCall is the retry loop for a session's settings.
func stormCall(r vsession.Retry) scenario.CallFunc {
	return retry.NewCall(retry.Options{Tries: r.Tries, Base: r.Base, Cap: r.Cap, Jitter: r.Jitter, HonorRetryAfter: r.HonorRetryAfter, Budget: r.Budget})
}
