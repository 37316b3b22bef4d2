//go:build !ratelab_ex_llmclient

package llmclient

import (
	"ratelab/scenario"
	tree "ratelab/solutions/llmclient"
)

// From is the tree this adapter takes the code from.
const From = "solutions/llmclient"

// NewPolite returns the tree's polite client configured as o.
func NewPolite(o scenario.PoliteOptions) scenario.Creator {
	return tree.NewPoliteClient(tree.Options{
		BaseURL: o.BaseURL, APIKey: o.APIKey, HTTPClient: o.HTTPClient,
		RPM: o.RPM, ITPM: o.ITPM, MaxInFlight: o.MaxInFlight, AttemptTimeout: o.AttemptTimeout,
	})
}
