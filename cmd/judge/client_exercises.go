//go:build ratelab_ex_llmclient

package main

import (
	"ratelab/exercises/llmclient"
	"ratelab/scenario"
)

const clientFrom = "exercises/llmclient"

// newPolite returns the learner's PoliteClient for o.
func newPolite(o scenario.PoliteOptions) scenario.Creator {
	return llmclient.NewPoliteClient(llmclient.Options{
		BaseURL: o.BaseURL, APIKey: o.APIKey, HTTPClient: o.HTTPClient,
		RPM: o.RPM, ITPM: o.ITPM, MaxInFlight: o.MaxInFlight,
	})
}
