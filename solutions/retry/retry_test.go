package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"ratelab/internal/suites/retrysuite"
)

// TestRetry runs the shared task 4 suite on this package. Do not edit it:
// the same checks grade the exercise and guard the reference solution.
func TestRetry(t *testing.T) {
	retrysuite.Run(t, retrysuite.Impl{
		BackoffDelay: BackoffDelay,
		CallWithRetries: func(ctx context.Context, c *http.Client, req *http.Request, o retrysuite.Options) (*http.Response, error) {
			opts := RetryOptions{
				MaxTries: o.MaxTries, Base: o.Base, Cap: o.Cap,
				Jitter: o.Jitter, HonorRetryAfter: o.HonorRetryAfter, OnAttempt: o.OnAttempt,
			}
			if o.Budget != nil {
				opts.Budget = o.Budget.(*RetryBudget)
			}
			return CallWithRetries(ctx, c, req, opts)
		},
		NewRetryBudget:     func(ratio float64) retrysuite.Budget { return NewRetryBudget(ratio) },
		ZeroBudget:         func() retrysuite.Budget { return new(RetryBudget) },
		ErrGaveUp:          ErrGaveUp,
		ErrBudgetExhausted: ErrBudgetExhausted,
		StatusCode: func(err error) (int, bool) {
			var se *StatusError
			if errors.As(err, &se) {
				return se.StatusCode, true
			}
			return 0, false
		},
	})
}
