// Package retry provides the polite side of rate limits: a retry loop for
// HTTP requests with capped exponential backoff, full jitter, respect for
// Retry-After, and a retry budget shared by many calls.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"ratelab/lab"
)

// Task 4 goal: a client that backs off when a server says "not now": it
// waits longer after every failure, picks each wait at random so that
// clients which failed together do not come back together, never retries
// sooner than the server asked, and stops adding load once its retries
// outgrow a fixed share of its traffic.
//
// This is the reference solution. Where the exercise has a TODO(task4), it
// has a short explanation instead.

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

// maxDrainBytes is the most of a discarded response's body that
// CallWithRetries reads before closing it. Reading a small body to the end
// lets the transport reuse the connection; a large one is cheaper to drop
// with its connection than to download.
const maxDrainBytes = 64 << 10

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
	attempt = max(attempt, 0)
	base, cap = max(base, 0), max(cap, 0)
	// base×2^attempt ≤ cap exactly when base ≤ cap>>attempt, and checking
	// it that way round shifts only cap, which can never overflow.
	ceiling := cap
	if base == 0 || attempt < 63 && base <= cap>>attempt {
		ceiling = base << attempt // 0 for a base of 0, however far it shifts
	}
	if !jitter || ceiling == 0 {
		return ceiling
	}
	// rand.N is uniform in [0, n); n = ceiling+1 includes the ceiling
	// unless that would overflow, which no one can tell apart.
	return rand.N(min(ceiling, lab.InfDuration-1) + 1)
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

func (o RetryOptions) withDefaults() RetryOptions {
	if o.MaxTries <= 0 {
		o.MaxTries = DefaultMaxTries
	}
	if o.Base <= 0 {
		o.Base = DefaultBase
	}
	if o.Cap <= 0 {
		o.Cap = DefaultCap
	}
	return o
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
	opts = opts.withDefaults()
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody && req.GetBody == nil {
		req.Body.Close() // as the transport would have
		return nil, fmt.Errorf("retry: %s %s has a body but no GetBody, so it cannot be sent again", req.Method, req.URL)
	}
	var last error // the failure of the previous attempt
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, stopped(ctx, attempt, last)
		}
		// Clone shares req.Body; the first attempt may use it, every later
		// one needs a fresh copy, since the transport consumed and closed
		// the previous one.
		r := req.Clone(ctx)
		if hasBody && attempt > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, fmt.Errorf("retry: %s %s: GetBody: %w", req.Method, req.URL, err)
			}
			r.Body = body
		}
		if attempt == 0 && opts.Budget != nil {
			opts.Budget.OnFirstAttempt()
		}
		if opts.OnAttempt != nil {
			opts.OnAttempt()
		}
		resp, err := c.Do(r)

		var floor time.Duration // from Retry-After, if any
		switch {
		case err != nil && ctx.Err() != nil:
			// The transport noticed first; the cause is ours, not the
			// server's.
			return nil, stopped(ctx, attempt+1, err)
		case err != nil && !retryableError(err):
			return nil, err
		case err != nil:
			last = err
		case !retryableStatus(resp.StatusCode):
			return resp, nil
		default:
			if opts.HonorRetryAfter {
				floor = retryAfter(resp.Header.Get("Retry-After"), time.Now())
			}
			discard(resp.Body)
			last = &StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
		}

		tries := attempt + 1
		if tries >= opts.MaxTries {
			return nil, fmt.Errorf("%w after %d %s: %w", ErrGaveUp, tries, plural(tries, "try", "tries"), last)
		}
		// Ask the budget only once a retry is otherwise due, so that the
		// last attempt of a call never spends a retry it will not make.
		if opts.Budget != nil && !opts.Budget.TryRetry() {
			return nil, fmt.Errorf("%w after %d %s (%w): %w", ErrGaveUp, tries, plural(tries, "try", "tries"), ErrBudgetExhausted, last)
		}
		wait := BackoffDelay(attempt, opts.Base, opts.Cap, opts.Jitter)
		if floor > 0 {
			// At least what the server asked, capped, plus up to a fifth
			// more or up to a second (the header's resolution), so that
			// everyone told "1" spreads over the whole of that second.
			floor = min(floor, opts.Cap)
			wait = max(wait, addSat(floor, rand.N(max(floor/5, time.Second)+1)))
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, stopped(ctx, tries, last)
		}
	}
}

// retryableStatus reports whether a response with status code may succeed
// if sent again: the server or a limit in front of it is overloaded (429,
// 503, 529) or failed on its side in a way that may pass (500, 502, 504).
// Every other 4xx is the request's own fault and fails the same way again.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, // 429
		http.StatusInternalServerError, // 500
		http.StatusBadGateway,          // 502
		http.StatusServiceUnavailable,  // 503
		http.StatusGatewayTimeout,      // 504
		529:                            // "overloaded", as Anthropic's API says it
		return true
	}
	return false
}

// retryableError reports whether a transport error may pass on another
// attempt: a timeout, or an error of the connection itself (refused,
// reset, closed before the answer). Errors of the request itself, such as
// an unsupported scheme, fail the same way every time.
func retryableError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// retryAfter returns the wait a Retry-After header value asks for at now:
// whole seconds ("120") or an HTTP date ("Fri, 31 Dec 1999 23:59:59 GMT").
// A missing or malformed value, or a date in the past, asks for nothing (0).
// A number of seconds too large for a Duration saturates at lab.InfDuration.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > math.MaxInt64/int64(time.Second) {
			return lab.InfDuration // ErrRange: too many digits
		}
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return max(at.Sub(now), 0) // Sub saturates instead of overflowing
}

// addSat returns a+b for durations that are not negative, or
// lab.InfDuration where the sum would overflow.
func addSat(a, b time.Duration) time.Duration {
	if a > lab.InfDuration-b {
		return lab.InfDuration
	}
	return a + b
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// discard reads the start of a body that nobody will look at and closes it,
// so its connection can serve the next attempt.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrainBytes))
	_ = body.Close() // the response is discarded; so is an error closing it
}

// sleep waits d, or until ctx is done, in which case it returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stopped is the error of a call whose ctx ended after tries attempts, the
// last of which failed with last (nil if there was none).
func stopped(ctx context.Context, tries int, last error) error {
	if last == nil {
		return fmt.Errorf("retry: stopped after %d %s: %w", tries, plural(tries, "try", "tries"), ctx.Err())
	}
	return fmt.Errorf("retry: stopped after %d %s: %w (last failure: %w)", tries, plural(tries, "try", "tries"), ctx.Err(), last)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
	deposit int64 // micro-retries per first attempt, set by NewRetryBudget

	mu      sync.Mutex
	balance int64 // guarded by mu: micro-retries held, 0..burstMicro
}

// The budget counts in millionths of a retry, so that ten deposits of 0.1
// make exactly one retry: in float64, 0.1 added ten times is a hair below 1.
const (
	microRetries = 1_000_000
	burstMicro   = BudgetBurst * microRetries
)

// NewRetryBudget returns a full RetryBudget that allows ratio retries per
// first attempt: 0.1 lets retries add at most a tenth to a client's
// traffic, plus the BudgetBurst it starts with. A ratio of 0 allows only
// the initial BudgetBurst. It panics if ratio is negative or NaN.
func NewRetryBudget(ratio float64) *RetryBudget {
	if !(ratio >= 0) {
		panic(fmt.Sprintf("retry: NewRetryBudget(%v): ratio must be zero or more", ratio))
	}
	// A deposit above the burst is capped anyway; capping the ratio first
	// keeps the conversion in range (+Inf included).
	deposit := int64(math.Round(min(ratio, BudgetBurst) * microRetries))
	return &RetryBudget{deposit: deposit, balance: burstMicro}
}

// OnFirstAttempt deposits the budget's ratio of a retry for a call's first
// attempt. Deposits beyond BudgetBurst retries are dropped.
func (b *RetryBudget) OnFirstAttempt() {
	b.mu.Lock()
	b.balance = min(b.balance+b.deposit, burstMicro)
	b.mu.Unlock()
}

// TryRetry withdraws one retry and reports true if the budget holds a whole
// one; otherwise it changes nothing and reports false, and the caller
// should fail instead of retrying.
func (b *RetryBudget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.balance < microRetries {
		return false
	}
	b.balance -= microRetries
	return true
}
