//go:build ratelab_ex_retry

package main

import (
	"context"
	"net/http"

	"ratelab/exercises/retry"
	"ratelab/scenario"
)

// newCall wraps the learner's retry loop as the harness's CallFunc.
func newCall(o callOptions) scenario.CallFunc {
	var budget *retry.RetryBudget
	if o.budget > 0 {
		budget = retry.NewRetryBudget(o.budget)
	}
	return func(ctx context.Context, c *http.Client, req *http.Request, onAttempt func()) (*http.Response, error) {
		return retry.CallWithRetries(ctx, c, req, retry.RetryOptions{
			MaxTries: o.tries, Base: o.base, Cap: o.cap, Jitter: o.jitter,
			HonorRetryAfter: o.honor, OnAttempt: onAttempt, Budget: budget,
		})
	}
}
