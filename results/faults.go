package results

import (
	"maps"
	"slices"
)

// The fault kinds of an APIFaultPlan: how the fake API answers a request
// it has chosen to fail instead of serving it.
const (
	// FaultRateLimit is a 429 rate_limit_error with a retry-after.
	FaultRateLimit = "rate_limit"
	// FaultRateLimitBare is a 429 rate_limit_error without retry-after:
	// the client must fall back on its own backoff.
	FaultRateLimitBare = "rate_limit_no_retry_after"
	// FaultOverloaded is a 529 overloaded_error.
	FaultOverloaded = "overloaded"
	// FaultServerError is a 500 api_error.
	FaultServerError = "server_error"
	// FaultTimeout is a request that is never answered: the API holds it
	// until the client gives up on it.
	FaultTimeout = "timeout"
)

// FaultKinds are every fault kind, in the order a plan that lists none
// takes them.
var FaultKinds = []string{FaultRateLimit, FaultRateLimitBare, FaultOverloaded, FaultServerError, FaultTimeout}

// An APIFaultPlan makes the fake API fail some of one key's requests on
// purpose, so that a flood drives the client through every documented
// path. The key's requests are counted from 1; request n fails when n is a
// multiple of Every, with the next kind of Kinds in turn. A failed request
// is never charged to the key's limits.
type APIFaultPlan struct {
	// Every is how often a request fails: one in Every (at least 2).
	Every int `json:"every"`
	// Kinds are the faults taken in turn (default FaultKinds).
	Kinds []string `json:"kinds,omitempty"`
	// RetryAfterSeconds is the retry-after of a FaultRateLimit, in whole
	// seconds (default 1).
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

// APIFaultStats is what a key's fault plan did and how the client answered,
// as the fake API saw it. A request's body identifies it: a retry sends the
// same body again.
type APIFaultStats struct {
	// Plan is the plan in force, its defaults filled in.
	Plan APIFaultPlan `json:"plan"`
	// Injected counts the requests failed on purpose, by fault kind.
	Injected map[string]int64 `json:"injected"`
	// Retried counts, by fault kind, the failed requests whose body came
	// again later: the client retried them.
	Retried map[string]int64 `json:"retried"`
	// RetryAfterSent counts the FaultRateLimit answers; RetriedEarly those
	// whose body came again sooner than their retry-after allowed.
	RetryAfterSent int64 `json:"retry_after_sent"`
	RetriedEarly   int64 `json:"retried_early"`
	// MinRetryAfterGapMS is the shortest time, in milliseconds, from a
	// FaultRateLimit answer to the same body's next request, and
	// RetryAfterMS the retry-after each of them asked for; -1 while no
	// such body has come again.
	MinRetryAfterGapMS float64 `json:"min_retry_after_gap_ms"`
	RetryAfterMS       float64 `json:"retry_after_ms"`
	// Stalled counts FaultTimeout requests still held, and MaxStalled the
	// most held at once.
	Stalled    int64 `json:"stalled"`
	MaxStalled int64 `json:"max_stalled"`
}

// Clone returns a copy of f that shares nothing with it.
func (f *APIFaultStats) Clone() *APIFaultStats {
	if f == nil {
		return nil
	}
	c := *f
	c.Plan.Kinds = slices.Clone(f.Plan.Kinds)
	c.Injected, c.Retried = maps.Clone(f.Injected), maps.Clone(f.Retried)
	return &c
}
