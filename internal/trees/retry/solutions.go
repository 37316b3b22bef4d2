//go:build !ratelab_ex_retry

package retry

import (
	"context"
	"net/http"

	"ratelab/scenario"
	tree "ratelab/solutions/retry"
)

// From is the tree this adapter takes the code from.
const From = "solutions/retry"

// NewCall returns a call that runs the tree's retry loop configured as o,
// with one retry budget shared by every call it makes when o.Budget > 0.
func NewCall(o Options) scenario.CallFunc {
	var budget *tree.RetryBudget
	if o.Budget > 0 {
		budget = tree.NewRetryBudget(o.Budget)
	}
	return func(ctx context.Context, c *http.Client, req *http.Request, onAttempt func()) (*http.Response, error) {
		return tree.CallWithRetries(ctx, c, req, tree.RetryOptions{
			MaxTries: o.Tries, Base: o.Base, Cap: o.Cap, Jitter: o.Jitter,
			HonorRetryAfter: o.HonorRetryAfter, OnAttempt: onAttempt, Budget: budget,
		})
	}
}
