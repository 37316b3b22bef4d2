//go:build ratelab_vsession

package main

import (
	"ratelab/fakegpu"
	"ratelab/internal/trees/llmclient"
	"ratelab/internal/vsession"
)

// In the grader's session build (build tag ratelab_vsession) this command
// becomes the grader's virtual-time session when started as one
// (vsession.Run), for task 5: the judge's strategies with the graded polite
// client against the fake Messages API.
func init() {
	vsession.Run(vsession.Host{NewServer: fakegpu.New, NewPolite: llmclient.NewPolite, Client: llmclient.From})
}
