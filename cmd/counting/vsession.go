//go:build ratelab_vsession

package main

import (
	"ratelab/fakegpu"
	"ratelab/internal/trees/counting"
	"ratelab/internal/vsession"
)

// In the grader's session build (build tag ratelab_vsession) this command
// becomes the grader's virtual-time session when started as one
// (vsession.Run), for task 8: the measurements of the graded limiters that
// take time, and the fake GPU with each of them in front of shedding.
func init() {
	set := counting.Limiters()
	vsession.Run(vsession.Host{
		NewServer: func(cfg fakegpu.Config, opts ...fakegpu.Option) (*fakegpu.Server, error) {
			return newServer(set, cfg, opts...)
		},
		Counting: &set, CountingTree: counting.From,
	})
}
