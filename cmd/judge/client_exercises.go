//go:build ratelab_ex_llmclient

package main

import "ratelab/exercises/llmclient"

const clientFrom = "exercises/llmclient"

// newPolite returns the learner's PoliteClient for o.
func newPolite(o politeOptions) creator {
	return llmclient.NewPoliteClient(llmclient.Options{
		BaseURL: o.baseURL, APIKey: o.key, HTTPClient: o.http,
		RPM: o.rpm, ITPM: o.itpm, MaxInFlight: o.inFlight,
	})
}
