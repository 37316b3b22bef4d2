package llmclient

import (
	"testing"

	"ratelab/internal/suites/llmclientsuite"
)

// TestLLMClient runs the shared task 5 suite on this package. Do not edit
// it: the same checks grade the exercise and guard the reference solution.
func TestLLMClient(t *testing.T) {
	llmclientsuite.Run(t,
		func(rate, burst float64) llmclientsuite.Bucket { return NewWaitingBucket(rate, burst) },
		func(o llmclientsuite.Options) llmclientsuite.Client {
			return NewPoliteClient(Options{
				BaseURL: o.BaseURL, APIKey: o.APIKey, HTTPClient: o.HTTPClient,
				RPM: o.RPM, ITPM: o.ITPM, MaxInFlight: o.MaxInFlight, MaxAttempts: o.MaxAttempts,
				AttemptTimeout: o.AttemptTimeout, BaseBackoff: o.BaseBackoff, MaxBackoff: o.MaxBackoff,
			})
		},
	)
}
