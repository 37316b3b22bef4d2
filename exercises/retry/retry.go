// Package retry provides the polite side of rate limits: a retry loop for
// HTTP requests with capped exponential backoff, full jitter, respect for
// Retry-After, and a retry budget shared by many calls.
package retry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"ratelab/lab"
)

// Task 4 goal: a client that backs off when a server says "not now": it
// waits longer after every failure, picks each wait at random so that
// clients which failed together do not come back together, never retries
// sooner than the server asked, and stops adding load once its retries
// outgrow a fixed share of its traffic.
//
// Fill in every TODO(task4) below, then run
//
//	go test -tags exercises ./exercises/retry
//
// The tests are shared with the reference solution; do not edit them. Read
// the clock with time.Now() and wait with a time.Timer or time.Sleep: the
// tests run in testing/synctest bubbles, where time is fake, so a wait of an
// hour costs nothing and is measured exactly. Draw random numbers from
// math/rand/v2. You may add private types, functions and methods, such as
// one that parses Retry-After and one that decides which errors to retry.
// The constants, errors and StatusError below are given: keep them.

// Defaults for the zero fields of a RetryOptions.
const (
	DefaultMaxTries = 12                     // attempts, the first one included
	DefaultBase     = 100 * time.Millisecond // the ceiling of the first backoff
	DefaultCap      = 5 * time.Second        // the largest ceiling of any backoff
)

// BudgetBurst is the most retries a RetryBudget holds. A new budget starts
// with BudgetBurst retries, so that a client with little traffic can still
// retry a few failures, and deposits beyond it are dropped, so that a long
// healthy stretch cannot save up retries for a storm later. Over any run of
// N first attempts a budget of ratio r allows at most r×N + BudgetBurst
// retries.
const BudgetBurst = 10

// ErrGaveUp is wrapped by the error CallWithRetries returns when it stops
// retrying a request that kept failing, after RetryOptions.MaxTries attempts
// or earlier when the retry budget is spent. The same error also wraps the
// last failure: a *StatusError or the transport's error.
var ErrGaveUp = errors.New("retry: gave up")

// ErrBudgetExhausted is wrapped, together with ErrGaveUp, by the error of a
// call that failed and was refused a retry by its RetryBudget.
var ErrBudgetExhausted = errors.New("retry budget exhausted")

// A StatusError is a response whose status was worth retrying (429, 500,
// 502, 503, 504 or 529), kept as the last failure of a call that gave up.
// Its body has already been read and closed.
type StatusError struct {
	StatusCode int    // such as 503
	Status     string // such as "503 Service Unavailable"
}

// Error returns the response's status line, such as
// "retry: status 503 Service Unavailable".
func (e *StatusError) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
	}
	return "retry: status " + status
}

// BackoffDelay returns how long to wait before retry attempt+1 of a request:
// attempt 0 is the wait after the first failure. The ceiling is
// min(cap, base×2^attempt): base, 2×base, 4×base and so on, never above cap.
// Without jitter BackoffDelay returns the ceiling itself; with jitter it
// returns a uniformly random duration in [0, ceiling], which is what Marc
// Brooker's "Exponential Backoff And Jitter" calls full jitter.
//
// A negative attempt counts as 0, and a negative base or cap as 0. The
// doubling saturates at cap instead of overflowing, for any attempt and any
// base. BackoffDelay is safe for concurrent use.
func BackoffDelay(attempt int, base, cap time.Duration, jitter bool) time.Duration {
	// Goal: the ceiling, then (with jitter) a uniform draw below it.
	// TODO(task4): work out min(cap, base×2^attempt) without ever computing
	// a product that overflows: attempt may be 1000 and base an hour. Cap
	// first, then jitter: the jittered delay is uniform on [0, ceiling].
	lab.NotImplemented(4, "BackoffDelay")
	return 0
}

// RetryOptions are the settings of one CallWithRetries. The zero value of
// MaxTries, Base and Cap (or any value ≤ 0) means DefaultMaxTries,
// DefaultBase and DefaultCap. Jitter and HonorRetryAfter are off in the zero
// value; a client talking to a shared server wants both on.
type RetryOptions struct {
	// MaxTries is the most attempts, the first one included: 1 never
	// retries.
	MaxTries int
	// Base and Cap shape the backoff: the wait after failure n (n = 0 for
	// the first) is BackoffDelay(n, Base, Cap, Jitter).
	Base, Cap time.Duration
	// Jitter picks every backoff at random below its ceiling (full jitter).
	Jitter bool
	// HonorRetryAfter makes a Retry-After header a floor on the next wait.
	HonorRetryAfter bool
	// OnAttempt, if not nil, is called just before each attempt is sent,
	// the first one included. A load generator can record when attempts
	// happen with it.
	OnAttempt func()
	// Budget, if not nil, limits retries to a share of first attempts. Many
	// calls, even concurrent ones, may share one budget; nil means no
	// budget.
	Budget *RetryBudget
}

// CallWithRetries sends req with c and retries it while it fails in a way
// that may pass: a status of 429, 500, 502, 503, 504 or 529, a timeout, or
// a connection error (refused, reset, closed early). Any other response,
// 200 or 404 alike, is returned at once as it is, with its body for the
// caller to close. Any other error, such as a bad URL, is returned at once.
//
// Before retry n+1 it waits BackoffDelay(n, opts.Base, opts.Cap,
// opts.Jitter). With opts.HonorRetryAfter, a Retry-After header on the
// failed response is a floor on that wait. It is in whole seconds (RFC
// 9110's delay-seconds, however many digits) or an HTTP date; a value in
// neither form, such as a word or a negative number, or a date in the
// past, asks for no floor. The wait is then the longer of the backoff and
// the Retry-After plus a random extra of up to a fifth of it or up to one
// second, whichever is more, so that clients told the same time do not
// return in step. One second is the header's own resolution: a server that
// says "1" has promised nothing finer, so spreading over that second costs
// nothing. A Retry-After longer than opts.Cap counts as opts.Cap, so the
// longest single wait is 1.2×Cap (or Cap plus a second) however far away
// the server's date or however large its number: a client does not park
// for a year on one header. The sum saturates at the largest Duration
// instead of overflowing. There is no wait after the last attempt.
//
// CallWithRetries reads (up to 64 KiB) and closes the body of every
// response it does not return. After opts.MaxTries attempts, or when
// opts.Budget refuses a retry, it returns a nil response and an error that
// wraps ErrGaveUp and the last failure, a *StatusError or the transport's
// error; a refusal from the budget also wraps ErrBudgetExhausted, and comes
// at once, without a wait. When ctx is done it stops at once, even in the
// middle of an attempt or a wait, and returns an error that wraps
// ctx.Err().
//
// Every attempt is req.Clone(ctx): ctx, not req's own context, governs the
// call. A request with a body must be able to produce it again: req.GetBody
// must be set, as http.NewRequestWithContext does for bytes and strings
// readers. Without it CallWithRetries sends nothing and returns an error.
//
// With opts.Budget every call deposits in the budget on its first attempt,
// and every retry must be allowed by it.
func CallWithRetries(ctx context.Context, c *http.Client, req *http.Request, opts RetryOptions) (*http.Response, error) {
	// Goal: one loop of attempts. Each round: stop if ctx is done; build
	// the attempt; call OnAttempt; send; decide; wait.
	//
	// TODO(task4): fill in the zero fields of opts with the defaults, and
	// refuse a request with a body but no GetBody.
	//
	// TODO(task4): send each attempt as req.Clone(ctx), with a fresh body
	// from req.GetBody from the second attempt on. Deposit in opts.Budget
	// on the first attempt only. Call opts.OnAttempt just before c.Do.
	//
	// TODO(task4): sort the outcome. An error while ctx is done is ctx's
	// doing: stop. A timeout (net.Error with Timeout()) or a connection
	// error (*net.OpError) may pass: retry. Any other error: return it. A
	// retryable status: note its Retry-After, drain and close its body, and
	// keep it as a *StatusError. Anything else: return the response.
	//
	// TODO(task4): after the last allowed attempt, or when the budget's
	// TryRetry says no, give up at once with an error wrapping ErrGaveUp
	// (and ErrBudgetExhausted) and the last failure: fmt.Errorf accepts
	// several %w. Otherwise wait the backoff, raised to the capped
	// Retry-After plus its jitter, in a select that also watches
	// ctx.Done().
	lab.NotImplemented(4, "CallWithRetries")
	return nil, nil
}

// A RetryBudget caps retries at a share of first attempts, like gRPC's retry
// throttling and Finagle's retry budgets: when a server is failing for
// everyone, retries would multiply its load just when it can least take it,
// and a budget keeps them to a small extra. Each call deposits ratio retries
// on its first attempt and each retry withdraws one; a call whose retry the
// budget refuses fails at once with its last failure.
//
// A budget holds at most BudgetBurst retries and starts full, so over any
// run of N first attempts it allows at most ratio×N + BudgetBurst retries.
// Share one budget among all the calls to one server.
//
// The zero value allows no retries; use NewRetryBudget. A RetryBudget is
// safe for concurrent use by multiple goroutines.
type RetryBudget struct {
	// Goal: a small token bucket of retries, filled by first attempts
	// instead of by time.
	// TODO(task4): choose the fields: what a first attempt deposits, what
	// the budget holds now, and a mutex. Mind that 0.1 added ten times in
	// float64 is a hair below 1; counting in millionths of a retry avoids
	// that.
}

// NewRetryBudget returns a full RetryBudget that allows ratio retries per
// first attempt: 0.1 lets retries add at most a tenth to a client's
// traffic, plus the BudgetBurst it starts with. A ratio of 0 allows only
// the initial BudgetBurst. It panics if ratio is negative or NaN.
func NewRetryBudget(ratio float64) *RetryBudget {
	// Goal: a budget holding BudgetBurst retries.
	// TODO(task4): check ratio, set your fields, remove the panic.
	lab.NotImplemented(4, "NewRetryBudget")
	return nil
}

// OnFirstAttempt deposits the budget's ratio of a retry for a call's first
// attempt. Deposits beyond BudgetBurst retries are dropped.
func (b *RetryBudget) OnFirstAttempt() {
	// TODO(task4): add the deposit under the mutex, capped at BudgetBurst.
	lab.NotImplemented(4, "RetryBudget.OnFirstAttempt")
}

// TryRetry withdraws one retry and reports true if the budget holds a whole
// one; otherwise it changes nothing and reports false, and the caller
// should fail instead of retrying.
func (b *RetryBudget) TryRetry() bool {
	// TODO(task4): withdraw one whole retry under the mutex, if it is there.
	lab.NotImplemented(4, "RetryBudget.TryRetry")
	return false
}
