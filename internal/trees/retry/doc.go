// Package retry is the adapter through which programs run task 4's retry loop:
// it takes the code from exercises/retry under the build tag ratelab_ex_retry,
// and from solutions/retry without it (see internal/layout). From names the
// tree it took.
package retry

import "time"

// Options configure the retry loop, as the tree's RetryOptions without
// what the scenario sets itself.
type Options struct {
	Tries           int           // attempts per call, the first included
	Base, Cap       time.Duration // the backoff's bounds
	Jitter          bool          // full jitter on every wait
	HonorRetryAfter bool          // wait at least what Retry-After says
	Budget          float64       // retries per first attempt; 0 for no budget
}
