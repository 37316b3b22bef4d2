//go:build !ratelab_ex_llmclient

package main

import "ratelab/solutions/llmclient"

const clientFrom = "solutions/llmclient"

// newPolite returns the reference PoliteClient for o.
func newPolite(o politeOptions) creator {
	return llmclient.NewPoliteClient(llmclient.Options{
		BaseURL: o.baseURL, APIKey: o.key, HTTPClient: o.http,
		RPM: o.rpm, ITPM: o.itpm, MaxInFlight: o.inFlight,
	})
}
