//go:build !ratelab_ex_llmclient

package main

import (
	"ratelab/scenario"
	"ratelab/solutions/llmclient"
)

const clientFrom = "solutions/llmclient"

// newPolite returns the reference PoliteClient for o.
func newPolite(o scenario.PoliteOptions) scenario.Creator {
	return llmclient.NewPoliteClient(llmclient.Options{
		BaseURL: o.BaseURL, APIKey: o.APIKey, HTTPClient: o.HTTPClient,
		RPM: o.RPM, ITPM: o.ITPM, MaxInFlight: o.MaxInFlight,
	})
}
