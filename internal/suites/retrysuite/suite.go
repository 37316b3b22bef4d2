// Package retrysuite is the one test suite of task 4 (backoff with full
// jitter, a retry loop that honours Retry-After, a retry budget). The
// exercise and the reference solution each run it through a thin adapter,
// so both are held to exactly the same checks. Learners do not edit it.
//
// Every check is a subtest of Run with a fixed name, such as
// TestRetry/FullJitterIsUniform:
//
//	BackoffBounds             base×2^attempt without jitter, [0, that] with it
//	BackoffCap                never above the cap, and the cap is reached
//	BackoffNoOverflow         huge attempts and bases saturate at the cap
//	FullJitterIsUniform       jittered delays are uniform on [0, ceiling]
//	RetriesRetryableStatuses  429, 500, 502, 503, 504 and 529 are retried
//	NeverRetries4xx           other 4xx (and 501) come back at once, as they are
//	RetriesTimeouts           timeouts are retried, the client's own included
//	RetriesConnectionErrors   refused and reset connections are retried
//	NeverRetriesOtherErrors   other transport errors come back at once
//	BackoffBetweenAttempts    the waits are BackoffDelay(0), (1), ...
//	RetryAfterSecondsFloor    Retry-After in seconds is a floor on the wait
//	RetryAfterDateFloor       Retry-After as an HTTP date is a floor too
//	RetryAfterJittered        clients told the same Retry-After spread out
//	RetryAfterCapped          a Retry-After beyond Cap counts as Cap
//	ClosesDiscardedBodies     every response not returned is drained and closed
//	ResendsRequest            every attempt carries the method, headers, body, ctx
//	StopsAfterMaxTries        MaxTries attempts, then ErrGaveUp with the last status
//	StopsOnContextCancel      a done ctx ends the call at once, wait or attempt
//	OnAttemptCalled           OnAttempt runs just before every attempt
//	BudgetLimitsRetries       retries ≤ ratio × first attempts + BudgetBurst
//	BudgetConcurrent          the same under 8 to 40 goroutines (and -race)
//	RealServer                retries against a real loopback server
//
// All but RealServer run inside a testing/synctest bubble: time.Now is fake
// and a sleep or timer only moves the fake clock, so waits of seconds or
// hours are measured exactly and cost nothing. Real sockets do not move
// fake time, so inside the bubbles the http.Client's Transport is an
// in-memory RoundTripper that answers each attempt from a script: a status
// with headers and a body that records whether it was read and closed, or
// an error (a timeout, a refused or reset connection), or a hang until the
// request's context is done. RealServer uses httptest on loopback, in real
// time, with millisecond waits.
//
// Every call into the code under test goes through a helper that turns a
// panic into a failure of that subtest only, so an unwritten stub fails
// each subtest with "task 4: ... is not implemented yet" and the others
// still run. Code that blocks for ever on a mutex hangs its subtest instead
// of failing it (a goroutine waiting for a mutex is not durably blocked, so
// synctest cannot tell): run the tests with -timeout; the timeout report
// names the subtest that was running.
package retrysuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// Budget is a retry budget as the suite drives it: OnFirstAttempt deposits
// for a call's first attempt, TryRetry withdraws one retry if it can.
type Budget interface {
	OnFirstAttempt()
	TryRetry() bool
}

// Options mirrors the package's RetryOptions field by field; the adapter
// copies it across. Budget is nil or a value NewRetryBudget returned.
type Options struct {
	MaxTries        int
	Base, Cap       time.Duration
	Jitter          bool
	HonorRetryAfter bool
	OnAttempt       func()
	Budget          Budget
}

// Impl is the code under test.
type Impl struct {
	// BackoffDelay is the package's BackoffDelay.
	BackoffDelay func(attempt int, base, cap time.Duration, jitter bool) time.Duration
	// CallWithRetries calls the package's CallWithRetries with opts copied
	// into a RetryOptions.
	CallWithRetries func(ctx context.Context, c *http.Client, req *http.Request, opts Options) (*http.Response, error)
	// NewRetryBudget is the package's NewRetryBudget.
	NewRetryBudget func(ratio float64) Budget
	// ErrGaveUp and ErrBudgetExhausted are the package's sentinel errors.
	ErrGaveUp, ErrBudgetExhausted error
	// StatusCode returns the status code of the *StatusError in err's
	// chain, if there is one.
	StatusCode func(err error) (code int, ok bool)
}

// budgetBurst is the package's documented BudgetBurst: the most retries a
// budget may allow beyond ratio × first attempts.
const budgetBurst = 10

// Run runs every check of task 4 as subtests of t.
func Run(t *testing.T, impl Impl) {
	if impl.BackoffDelay == nil || impl.CallWithRetries == nil || impl.NewRetryBudget == nil ||
		impl.ErrGaveUp == nil || impl.ErrBudgetExhausted == nil || impl.StatusCode == nil {
		t.Fatalf("retrysuite.Run: Impl has a nil field (%+v); want all of them set", impl)
	}
	s := &suite{impl: impl}
	checks := []struct {
		name string
		f    func(*testing.T)
		real bool // runs outside a bubble, in real time
	}{
		{"BackoffBounds", s.backoffBounds, false},
		{"BackoffCap", s.backoffCap, false},
		{"BackoffNoOverflow", s.backoffNoOverflow, false},
		{"FullJitterIsUniform", s.fullJitterIsUniform, false},
		{"RetriesRetryableStatuses", s.retriesRetryableStatuses, false},
		{"NeverRetries4xx", s.neverRetries4xx, false},
		{"RetriesTimeouts", s.retriesTimeouts, false},
		{"RetriesConnectionErrors", s.retriesConnectionErrors, false},
		{"NeverRetriesOtherErrors", s.neverRetriesOtherErrors, false},
		{"BackoffBetweenAttempts", s.backoffBetweenAttempts, false},
		{"RetryAfterSecondsFloor", s.retryAfterSecondsFloor, false},
		{"RetryAfterDateFloor", s.retryAfterDateFloor, false},
		{"RetryAfterJittered", s.retryAfterJittered, false},
		{"RetryAfterCapped", s.retryAfterCapped, false},
		{"ClosesDiscardedBodies", s.closesDiscardedBodies, false},
		{"ResendsRequest", s.resendsRequest, false},
		{"StopsAfterMaxTries", s.stopsAfterMaxTries, false},
		{"StopsOnContextCancel", s.stopsOnContextCancel, false},
		{"OnAttemptCalled", s.onAttemptCalled, false},
		{"BudgetLimitsRetries", s.budgetLimitsRetries, false},
		{"BudgetConcurrent", s.budgetConcurrent, false},
		{"RealServer", s.realServer, true},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.real {
				c.f(t)
				return
			}
			suitekit.Bubble(t, c.f)
		})
	}
}

type suite struct {
	impl Impl
}

// --- Calling the code under test ---

func (s *suite) delay(t *testing.T, attempt int, base, cap time.Duration, jitter bool) time.Duration {
	t.Helper()
	var d time.Duration
	if r, stack := suitekit.Catch(func() { d = s.impl.BackoffDelay(attempt, base, cap, jitter) }); r != nil {
		t.Fatal(suitekit.PanicReport(fmt.Sprintf("BackoffDelay(%d, %v, %v, %v)", attempt, base, cap, jitter), r, stack))
	}
	return d
}

func (s *suite) budget(t *testing.T, ratio float64) Budget {
	t.Helper()
	var b Budget
	if r, stack := suitekit.Catch(func() { b = s.impl.NewRetryBudget(ratio) }); r != nil {
		t.Fatal(suitekit.PanicReport(fmt.Sprintf("NewRetryBudget(%v)", ratio), r, stack))
	}
	if b == nil {
		t.Fatalf("NewRetryBudget(%v) = nil; want a budget", ratio)
	}
	return b
}

func deposit(t *testing.T, b Budget) {
	t.Helper()
	if r, stack := suitekit.Catch(b.OnFirstAttempt); r != nil {
		t.Fatal(suitekit.PanicReport("RetryBudget.OnFirstAttempt()", r, stack))
	}
}

func withdraw(t *testing.T, b Budget) bool {
	t.Helper()
	var ok bool
	if r, stack := suitekit.Catch(func() { ok = b.TryRetry() }); r != nil {
		t.Fatal(suitekit.PanicReport("RetryBudget.TryRetry()", r, stack))
	}
	return ok
}

// outcome is what one CallWithRetries returned, and how long it took.
type outcome struct {
	resp *http.Response
	err  error
	took time.Duration
}

// callWith runs CallWithRetries(ctx, c, req, opts) and returns what it did,
// or a description of the panic it raised.
func (s *suite) callWith(ctx context.Context, c *http.Client, req *http.Request, opts Options) (out outcome, failure string) {
	start := time.Now()
	if r, stack := suitekit.Catch(func() { out.resp, out.err = s.impl.CallWithRetries(ctx, c, req, opts) }); r != nil {
		return out, suitekit.PanicReport("CallWithRetries", r, stack)
	}
	out.took = time.Since(start)
	return out, ""
}

// call sends a GET to srv through CallWithRetries with opts.
func (s *suite) call(t *testing.T, srv *server, opts Options) outcome {
	t.Helper()
	return s.callCtx(t, t.Context(), srv, newGet(t), opts)
}

func (s *suite) callCtx(t *testing.T, ctx context.Context, srv *server, req *http.Request, opts Options) outcome {
	t.Helper()
	out, failure := s.callWith(ctx, srv.client(), req, opts)
	if failure != "" {
		t.Fatal(failure)
	}
	return out
}

func newGet(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://fakegpu.test/generate", nil)
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	return req
}

// --- The scripted server ---

// A reply is what the scripted server does with one attempt: an error, a
// hang until the request's context is done, or a response.
type reply struct {
	status     int
	retryAfter string                     // a Retry-After header, if not ""
	retryAt    func(now time.Time) string // a Retry-After worked out when the attempt arrives
	err        error
	hang       bool
}

func (r reply) String() string {
	switch {
	case r.err != nil:
		return fmt.Sprintf("error %q", r.err)
	case r.hang:
		return "no answer until the request's context is done"
	case r.retryAfter != "":
		return fmt.Sprintf("%d with Retry-After: %s", r.status, r.retryAfter)
	}
	return fmt.Sprint(r.status)
}

func status(code int) reply { return reply{status: code} }

// hangLimit is how long a hanging reply waits for a context that is never
// done before it gives up, so a call that does not pass its ctx to the
// attempt fails with a clear message instead of deadlocking the bubble.
const hangLimit = time.Hour

var errHungAttempt = errors.New("retrysuite: the attempt hung for an hour: its context was never done")

// server is an http.RoundTripper that answers attempt i with replies[i],
// the last reply repeating for ever, and records everything it sees. It is
// safe for concurrent use.
type server struct {
	replies []reply

	mu       sync.Mutex
	attempts []seen
	bodies   []*body  // response bodies handed out, in order
	events   []string // "OnAttempt" and "send", in order
	start    time.Time
}

// seen is one attempt as the server received it.
type seen struct {
	at       time.Time
	method   string
	header   http.Header
	body     string
	ctxValue any
	ctxDone  bool // the request's context was already done
}

type ctxKey struct{}

func newServer(replies ...reply) *server {
	return &server{replies: replies, start: time.Now()}
}

func (s *server) client() *http.Client { return &http.Client{Transport: s} }

func (s *server) RoundTrip(req *http.Request) (*http.Response, error) {
	a := seen{at: time.Now(), method: req.Method, header: req.Header.Clone(), ctxValue: req.Context().Value(ctxKey{}), ctxDone: req.Context().Err() != nil}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		a.body = string(b)
		if err != nil {
			a.body += fmt.Sprintf(" (error reading the body: %v)", err)
		}
	}
	s.mu.Lock()
	n := len(s.attempts)
	s.attempts = append(s.attempts, a)
	s.events = append(s.events, "send")
	r := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()

	if err := req.Context().Err(); err != nil {
		return nil, err // as http.Transport does
	}
	if r.hang {
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(hangLimit):
			return nil, errHungAttempt
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	text := http.StatusText(r.status) + "\n"
	if r.status == http.StatusOK {
		text = "ok"
	}
	b := &body{r: strings.NewReader(text), status: r.status}
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	if r.retryAfter != "" {
		h.Set("Retry-After", r.retryAfter)
	}
	if r.retryAt != nil {
		h.Set("Retry-After", r.retryAt(a.at))
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)),
		StatusCode: r.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          b,
		ContentLength: int64(len(text)),
		Request:       req,
	}, nil
}

func (s *server) onAttempt() {
	s.mu.Lock()
	s.events = append(s.events, "OnAttempt")
	s.mu.Unlock()
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.attempts)
}

// gaps returns the fake time between consecutive attempts.
func (s *server) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(s.attempts); i++ {
		gaps = append(gaps, s.attempts[i].at.Sub(s.attempts[i-1].at))
	}
	return gaps
}

// history lists the attempts with their fake time and the scripted reply.
func (s *server) history() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for i, a := range s.attempts {
		fmt.Fprintf(&b, "\n  attempt %d at t=%v: %v", i+1, a.at.Sub(s.start), s.replies[min(i, len(s.replies)-1)])
	}
	if len(s.attempts) == 0 {
		b.WriteString("\n  (no attempt reached the server)")
	}
	return b.String()
}

// body is a response body that records whether it was read to the end and
// closed.
type body struct {
	status int

	mu     sync.Mutex
	r      *strings.Reader
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("read on a closed body")
	}
	return b.r.Read(p)
}

func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *body) state() (drained, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.r.Len() == 0, b.closed
}

// timeoutError is a network timeout, as a net.Conn deadline reports it.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout (scripted)" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: fakeAddr{}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

func reset() error {
	return &net.OpError{Op: "read", Net: "tcp", Addr: fakeAddr{}, Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

type fakeAddr struct{}

func (fakeAddr) Network() string { return "tcp" }
func (fakeAddr) String() string  { return "192.0.2.1:80" }

// --- What a call must have returned ---

// wantResponse fails t unless out is a response of status want with a body
// that is still open and reads as it was sent, and closes it.
func wantResponse(t *testing.T, out outcome, want int, srv *server, why string) {
	t.Helper()
	if out.err != nil || out.resp == nil {
		t.Fatalf("CallWithRetries = (%v, %v); want a %d response and no error\n%s\nattempts:%s", respStatus(out.resp), out.err, want, why, srv.history())
	}
	if out.resp.StatusCode != want {
		t.Fatalf("CallWithRetries returned status %d; want %d\n%s\nattempts:%s", out.resp.StatusCode, want, why, srv.history())
	}
	text := http.StatusText(want) + "\n"
	if want == http.StatusOK {
		text = "ok"
	}
	got, err := io.ReadAll(out.resp.Body)
	out.resp.Body.Close()
	if err != nil || string(got) != text {
		t.Fatalf("the returned response's body reads (%q, %v); want (%q, <nil>)\nreturn the response as the transport gave it: the caller reads and closes its body", got, err, text)
	}
}

// wantGaveUp fails t unless out is a nil response and an error wrapping
// ErrGaveUp.
func (s *suite) wantGaveUp(t *testing.T, out outcome, srv *server, why string) {
	t.Helper()
	if out.resp != nil {
		out.resp.Body.Close()
		t.Fatalf("CallWithRetries returned a %d response; want (nil, an error wrapping ErrGaveUp)\n%s\nattempts:%s", out.resp.StatusCode, why, srv.history())
	}
	if !errors.Is(out.err, s.impl.ErrGaveUp) {
		t.Fatalf("CallWithRetries error = %v; want an error wrapping ErrGaveUp\n%s\nattempts:%s", out.err, why, srv.history())
	}
}

func respStatus(r *http.Response) string {
	if r == nil {
		return "<nil>"
	}
	return fmt.Sprintf("status %d", r.StatusCode)
}

func wantAttempts(t *testing.T, srv *server, want int, why string) {
	t.Helper()
	if got := srv.count(); got != want {
		t.Fatalf("the server saw %d attempts; want %d\n%s\nattempts:%s", got, want, why, srv.history())
	}
}

// --- BackoffDelay ---

func (s *suite) backoffBounds(t *testing.T) {
	const base, cap = 100 * time.Millisecond, time.Hour
	for attempt := range 11 {
		ceiling := base << attempt
		if got := s.delay(t, attempt, base, cap, false); got != ceiling {
			t.Errorf("BackoffDelay(%d, %v, %v, false) = %v; want %v (base×2^attempt, below the cap)", attempt, base, cap, got, ceiling)
		}
		for range 200 {
			if got := s.delay(t, attempt, base, cap, true); got < 0 || got > ceiling {
				t.Fatalf("BackoffDelay(%d, %v, %v, true) = %v; want a value in [0, %v] (full jitter: uniform between 0 and base×2^attempt)", attempt, base, cap, got, ceiling)
			}
		}
	}
	tests := []struct {
		attempt   int
		base, cap time.Duration
		want      time.Duration
		why       string
	}{
		{0, time.Second, 10 * time.Second, time.Second, "attempt 0 waits base"},
		{3, 250 * time.Millisecond, 10 * time.Second, 2 * time.Second, "250ms × 2^3"},
		{1, 3 * time.Nanosecond, time.Second, 6 * time.Nanosecond, "3ns × 2"},
		{0, 0, 5 * time.Second, 0, "a base of 0 never waits"},
		{-1, 100 * time.Millisecond, 5 * time.Second, 100 * time.Millisecond, "a negative attempt counts as 0"},
		{-1000, 100 * time.Millisecond, 5 * time.Second, 100 * time.Millisecond, "a negative attempt counts as 0"},
	}
	for _, tt := range tests {
		if got := s.delay(t, tt.attempt, tt.base, tt.cap, false); got != tt.want {
			t.Errorf("BackoffDelay(%d, %v, %v, false) = %v; want %v (%s)", tt.attempt, tt.base, tt.cap, got, tt.want, tt.why)
		}
	}
	if got := s.delay(t, 4, 0, time.Second, true); got != 0 {
		t.Errorf("BackoffDelay(4, 0s, 1s, true) = %v; want 0s (jitter below a ceiling of 0)", got)
	}
}

func (s *suite) backoffCap(t *testing.T) {
	const base, cap = 100 * time.Millisecond, 5 * time.Second
	if got, want := s.delay(t, 5, base, cap, false), 3200*time.Millisecond; got != want {
		t.Errorf("BackoffDelay(5, %v, %v, false) = %v; want %v (100ms × 2^5, still below the cap)", base, cap, got, want)
	}
	for attempt := 6; attempt <= 40; attempt++ {
		if got := s.delay(t, attempt, base, cap, false); got != cap {
			t.Errorf("BackoffDelay(%d, %v, %v, false) = %v; want %v (100ms × 2^%d is past the cap, so the cap)", attempt, base, cap, got, cap, attempt)
		}
	}
	if got := s.delay(t, 0, 10*time.Second, time.Second, false); got != time.Second {
		t.Errorf("BackoffDelay(0, 10s, 1s, false) = %v; want 1s (a base above the cap is capped too)", got)
	}
	// Jittered delays past the cap are uniform on [0, cap]: 2000 of them
	// reach above 4.5 s unless something is wrong (chance 0.9^2000).
	var largest time.Duration
	for range 2000 {
		got := s.delay(t, 12, base, cap, true)
		if got < 0 || got > cap {
			t.Fatalf("BackoffDelay(12, %v, %v, true) = %v; want a value in [0, %v] (the cap bounds the jittered delay too)", base, cap, got, cap)
		}
		largest = max(largest, got)
	}
	if largest < cap*9/10 {
		t.Errorf("the largest of 2000 BackoffDelay(12, %v, %v, true) = %v; want above %v (uniform on [0, cap]: cap first, then jitter)", base, cap, largest, cap*9/10)
	}
}

func (s *suite) backoffNoOverflow(t *testing.T) {
	const inf = lab.InfDuration
	tests := []struct {
		attempt   int
		base, cap time.Duration
		want      time.Duration
	}{
		{1000, 100 * time.Millisecond, 5 * time.Second, 5 * time.Second},
		{64, 100 * time.Millisecond, 5 * time.Second, 5 * time.Second},
		{math.MaxInt, time.Second, time.Minute, time.Minute},
		{1 << 40, time.Hour, 24 * time.Hour, 24 * time.Hour},
		{62, 1, inf, 1 << 62},
		{63, 1, inf, inf},
		{64, 1, inf, inf},
		{40, 1000 * time.Hour, inf, inf},
		{2, inf / 2, inf, inf},
		{1, inf, inf, inf},
		{0, inf, time.Second, time.Second},
		{33, time.Second, inf, time.Second << 33},
		{34, time.Second, inf, inf}, // 2^34 s is 544 years: past the largest Duration
	}
	for _, tt := range tests {
		if got := s.delay(t, tt.attempt, tt.base, tt.cap, false); got != tt.want {
			t.Errorf("BackoffDelay(%d, %v, %v, false) = %v; want %v (base×2^attempt saturates at the cap, it must not overflow)", tt.attempt, tt.base, tt.cap, got, tt.want)
		}
		for range 50 {
			if got := s.delay(t, tt.attempt, tt.base, tt.cap, true); got < 0 || got > tt.want {
				t.Fatalf("BackoffDelay(%d, %v, %v, true) = %v; want a value in [0, %v]", tt.attempt, tt.base, tt.cap, got, tt.want)
			}
		}
	}
}

// fullJitterIsUniform samples a jittered delay and compares it with the
// uniform distribution on [0, ceiling], below the cap and at it.
//
// With n = 20000 samples, the fraction in each quarter of the range has a
// binomial standard deviation of √(0.25×0.75/n) = 0.0031; the tolerance of
// 0.015 is 4.9 standard deviations. The mean of n uniform samples, as a
// fraction of the ceiling, has a standard deviation of 1/√(12n) = 0.0020;
// the tolerance of 0.01 is 4.9 of them. Ten such comparisons fail a correct
// implementation with a chance of about 1 in 100000. Without jitter every
// sample is the ceiling (all in the top quarter, mean 1); with "equal
// jitter" (d/2 + rand(d/2)) none are below d/2 and the mean is 0.75; with
// the jitter applied before the cap, nearly all samples at the cap are the
// cap. All miss by far more than 20 standard deviations.
func (s *suite) fullJitterIsUniform(t *testing.T) {
	const (
		n       = 20000
		tolFrac = 0.015
		tolMean = 0.01
	)
	cases := []struct {
		attempt   int
		base, cap time.Duration
		ceiling   time.Duration
		where     string
	}{
		{3, 100 * time.Millisecond, 10 * time.Second, 800 * time.Millisecond, "below the cap: ceiling 100ms × 2^3"},
		{10, 100 * time.Millisecond, 5 * time.Second, 5 * time.Second, "past the cap: ceiling 5s, not 102.4s"},
	}
	for _, c := range cases {
		var quarters [4]int
		sum := 0.0
		for range n {
			d := s.delay(t, c.attempt, c.base, c.cap, true)
			if d < 0 || d > c.ceiling {
				t.Fatalf("BackoffDelay(%d, %v, %v, true) = %v; want a value in [0, %v] (%s)", c.attempt, c.base, c.cap, d, c.ceiling, c.where)
			}
			x := float64(d) / float64(c.ceiling)
			quarters[min(int(4*x), 3)]++
			sum += x
		}
		call := fmt.Sprintf("BackoffDelay(%d, %v, %v, true)", c.attempt, c.base, c.cap)
		var fracs []string
		off := false
		for _, count := range quarters {
			frac := float64(count) / n
			off = off || math.Abs(frac-0.25) > tolFrac
			fracs = append(fracs, fmt.Sprintf("%.1f%%", 100*frac))
		}
		if off {
			t.Errorf("%s: of %d samples, the four quarters of [0, %v] got %s; want 25%% ± %.1f%% each\n"+
				"full jitter is uniform on [0, ceiling] (%s)", call, n, c.ceiling, strings.Join(fracs, ", "), 100*tolFrac, c.where)
		}
		if mean := sum / n; math.Abs(mean-0.5) > tolMean {
			t.Errorf("%s: mean of %d samples = %v (%.3f of the ceiling); want %v ± %v (half the ceiling: %s)",
				call, n, time.Duration(mean*float64(c.ceiling)), mean, c.ceiling/2, time.Duration(tolMean*float64(c.ceiling)), c.where)
		}
	}
}

// --- Which failures are retried ---

func (s *suite) retriesRetryableStatuses(t *testing.T) {
	for _, code := range []int{429, 500, 502, 503, 504, 529} {
		srv := newServer(status(code), status(code), status(200))
		out := s.call(t, srv, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
		why := fmt.Sprintf("%d may pass if sent again: retry it (the script answers %d, %d, 200)", code, code, code)
		wantResponse(t, out, 200, srv, why)
		wantAttempts(t, srv, 3, why)
	}
}

func (s *suite) neverRetries4xx(t *testing.T) {
	codes := []int{400, 401, 403, 404, 405, 409, 413, 422, 451, 501, 200, 201, 204}
	for _, code := range codes {
		srv := newServer(reply{status: code, retryAfter: "1"}, status(200))
		out := s.call(t, srv, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true, HonorRetryAfter: true})
		why := fmt.Sprintf("%d is not one of 429, 500, 502, 503, 504, 529: it fails (or succeeds) the same way every time, "+
			"so return it at once, as it is, even with a Retry-After", code)
		if code < 400 {
			why = fmt.Sprintf("%d is a success: return it at once", code)
		}
		wantAttempts(t, srv, 1, why)
		wantResponse(t, out, code, srv, why)
	}
}

func (s *suite) retriesTimeouts(t *testing.T) {
	opts := Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true}
	deadline := &net.OpError{Op: "read", Net: "tcp", Addr: fakeAddr{}, Err: os.ErrDeadlineExceeded}
	srv := newServer(reply{err: timeoutError{}}, reply{err: deadline}, status(200))
	out := s.call(t, srv, opts)
	why := "a timeout may pass on another attempt (the transport returned a net.Error whose Timeout() is true, then a read deadline, then 200)"
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 3, why)

	// The http.Client's own Timeout: the first attempt gets no answer, the
	// client gives up after 2 s, and that must count as a timeout too, even
	// though its error wraps context.DeadlineExceeded: the caller's ctx is
	// still live.
	srv = newServer(reply{hang: true}, status(200))
	c := srv.client()
	c.Timeout = 2 * time.Second
	out, failure := s.callWith(t.Context(), c, newGet(t), opts)
	if failure != "" {
		t.Fatal(failure)
	}
	why = "the http.Client's Timeout (2s) expired on the first attempt: that is a timeout to retry, not the caller's ctx ending; test ctx.Err(), not the error's type, to tell them apart"
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 2, why)
	if out.took < 2*time.Second {
		t.Errorf("CallWithRetries took %v; want ≥ 2s (the first attempt waited out the client's Timeout)", out.took)
	}
}

func (s *suite) retriesConnectionErrors(t *testing.T) {
	srv := newServer(reply{err: refused()}, reply{err: reset()}, status(200))
	out := s.call(t, srv, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	why := "a refused or reset connection may work on another attempt (the transport returned *net.OpError: connection refused, then connection reset, then 200)"
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 3, why)
}

func (s *suite) neverRetriesOtherErrors(t *testing.T) {
	broken := errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority (scripted)")
	srv := newServer(reply{err: broken}, status(200))
	out := s.call(t, srv, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	why := "an error that is neither a timeout nor a connection error (here a bad certificate) fails the same way every time: return it at once"
	wantAttempts(t, srv, 1, why)
	if out.resp != nil {
		out.resp.Body.Close()
		t.Fatalf("CallWithRetries returned a %d response; want (nil, the transport's error)\n%s", out.resp.StatusCode, why)
	}
	if !errors.Is(out.err, broken) {
		t.Fatalf("CallWithRetries error = %v; want an error wrapping the transport's %q", out.err, broken)
	}
}

// --- Waits ---

func (s *suite) backoffBetweenAttempts(t *testing.T) {
	const base, cap = 100 * time.Millisecond, time.Second
	srv := newServer(status(503))
	out := s.call(t, srv, Options{MaxTries: 8, Base: base, Cap: cap})
	s.wantGaveUp(t, out, srv, "every attempt got 503 and MaxTries is 8")
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if got := srv.gaps(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("without jitter, the waits between 8 attempts were %v; want %v\n(before retry n+1 wait BackoffDelay(n, Base=100ms, Cap=1s, false), n from 0)", got, want)
	}
	if want := 4500 * time.Millisecond; out.took != want {
		t.Errorf("CallWithRetries took %v; want %v (the sum of the 7 waits: no wait after the last attempt)", out.took, want)
	}

	// With jitter every wait lies in [0, its ceiling], and they are not all
	// the ceilings.
	atCeiling, total := 0, 0
	for range 30 {
		srv := newServer(status(503))
		out := s.call(t, srv, Options{MaxTries: 6, Base: base, Cap: cap, Jitter: true})
		s.wantGaveUp(t, out, srv, "every attempt got 503 and MaxTries is 6")
		for n, gap := range srv.gaps() {
			ceiling := min(cap, base<<n)
			if gap < 0 || gap > ceiling {
				t.Fatalf("with jitter, the wait before retry %d was %v; want a value in [0, %v] (BackoffDelay(%d, 100ms, 1s, true))\nattempts:%s", n+1, gap, ceiling, n, srv.history())
			}
			total++
			if gap == ceiling {
				atCeiling++
			}
		}
	}
	if atCeiling > total/2 {
		t.Errorf("with Jitter, %d of %d waits were exactly their ceiling; want a random wait below it (pass Jitter on to BackoffDelay)", atCeiling, total)
	}
}

// retryAfterGap runs one call against srv (a reply with Retry-After, then
// 200) and returns the wait between the two attempts.
func (s *suite) retryAfterGap(t *testing.T, srv *server, opts Options, why string) time.Duration {
	t.Helper()
	out := s.call(t, srv, opts)
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 2, why)
	return srv.gaps()[0]
}

func (s *suite) retryAfterSecondsFloor(t *testing.T) {
	const base = 100 * time.Millisecond
	opts := Options{MaxTries: 3, Base: base, Cap: time.Minute, Jitter: true, HonorRetryAfter: true}
	for _, tt := range []struct {
		reply reply
		want  time.Duration
	}{
		{reply{status: 503, retryAfter: "3"}, 3 * time.Second},
		{reply{status: 429, retryAfter: "1"}, time.Second},
		{reply{status: 529, retryAfter: "12"}, 12 * time.Second},
	} {
		srv := newServer(tt.reply, status(200))
		why := fmt.Sprintf("the server answered %v, then 200", tt.reply)
		gap := s.retryAfterGap(t, srv, opts, why)
		if hi := tt.want*3/2 + time.Second; gap < tt.want || gap > hi {
			t.Errorf("after %v the client waited %v; want between %v and %v\n"+
				"with HonorRetryAfter, Retry-After is a floor on the wait (the backoff here is at most %v), plus a little jitter on top",
				tt.reply, gap, tt.want, hi, base)
		}
	}
	// No floor: Retry-After 0, malformed values, and HonorRetryAfter off.
	for _, tt := range []struct {
		reply  reply
		honour bool
		why    string
	}{
		{reply{status: 503, retryAfter: "0"}, true, "Retry-After 0 asks for no wait at all"},
		{reply{status: 503, retryAfter: "soon"}, true, "a malformed Retry-After is ignored"},
		{reply{status: 503, retryAfter: "-3"}, true, "a negative Retry-After is malformed and ignored"},
		{reply{status: 503, retryAfter: "3"}, false, "with HonorRetryAfter false, Retry-After is ignored"},
	} {
		srv := newServer(tt.reply, status(200))
		o := opts
		o.HonorRetryAfter = tt.honour
		gap := s.retryAfterGap(t, srv, o, fmt.Sprintf("the server answered %v, then 200", tt.reply))
		if gap > base {
			t.Errorf("after %v (HonorRetryAfter %v) the client waited %v; want at most %v, the plain backoff BackoffDelay(0, %v, ...)\n%s",
				tt.reply, tt.honour, gap, base, base, tt.why)
		}
	}
}

func (s *suite) retryAfterDateFloor(t *testing.T) {
	const base = 100 * time.Millisecond
	opts := Options{MaxTries: 3, Base: base, Cap: time.Minute, Jitter: true, HonorRetryAfter: true}
	// An HTTP date has whole seconds: the server names the whole second 5 s
	// after the attempt's own second, so the floor is exactly that date.
	var at time.Time
	srv := newServer(reply{status: 503, retryAt: func(now time.Time) string {
		at = now.Truncate(time.Second).Add(5 * time.Second)
		return at.UTC().Format(http.TimeFormat)
	}}, status(200))
	gap := s.retryAfterGap(t, srv, opts, "the server answered 503 with Retry-After as an HTTP date 5 s ahead, then 200")
	floor := at.Sub(srv.attempts[0].at)
	if hi := floor*3/2 + time.Second; gap < floor || gap > hi {
		t.Errorf("after 503 with Retry-After: %s (%v after the attempt) the client waited %v; want between %v and %v\n"+
			"Retry-After may be an HTTP date (http.ParseTime); the wait lasts at least until then, plus a little jitter",
			at.UTC().Format(http.TimeFormat), floor, gap, floor, hi)
	}

	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	srv = newServer(reply{status: 503, retryAfter: past}, status(200))
	gap = s.retryAfterGap(t, srv, opts, "the server answered 503 with Retry-After an hour ago, then 200")
	if gap > base {
		t.Errorf("after 503 with Retry-After: %s (an hour ago) the client waited %v; want at most %v, the plain backoff: a date in the past asks for no wait", past, gap, base)
	}
}

func (s *suite) retryAfterJittered(t *testing.T) {
	// Fifty clients told "Retry-After: 1" must not all come back at the
	// same instant. With a uniform extra of up to a fifth (200 ms), fifty
	// waits spread over about 196 ms; the check asks for 50 ms, and allows
	// an extra of up to a second, the header's resolution.
	const calls = 50
	opts := Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Minute, Jitter: true, HonorRetryAfter: true}
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for range calls {
		srv := newServer(reply{status: 503, retryAfter: "1"}, status(200))
		gap := s.retryAfterGap(t, srv, opts, "the server answered 503 with Retry-After: 1, then 200")
		if gap < time.Second || gap > 2500*time.Millisecond {
			t.Fatalf("after 503 with Retry-After: 1 the client waited %v; want between 1s and 2.5s", gap)
		}
		lo, hi = min(lo, gap), max(hi, gap)
	}
	if hi-lo < 50*time.Millisecond {
		t.Errorf("%d calls told Retry-After: 1 waited between %v and %v; want a spread of at least 50ms\n"+
			"add a little random jitter on top of Retry-After, or every client the server told the same thing comes back in lockstep",
			calls, lo, hi)
	}
}

func (s *suite) retryAfterCapped(t *testing.T) {
	const cap = 5 * time.Second
	inAYear := func(now time.Time) string { return now.AddDate(1, 0, 0).UTC().Format(http.TimeFormat) }
	srv := newServer(
		reply{status: 503, retryAfter: "31536000"}, // a year
		reply{status: 503, retryAt: inAYear},
		reply{status: 429, retryAfter: "10000000000"}, // 317 years: as a Duration it overflows
		reply{status: 503, retryAfter: "7"},
		status(200),
	)
	out := s.call(t, srv, Options{MaxTries: 6, Base: 100 * time.Millisecond, Cap: cap, Jitter: true, HonorRetryAfter: true})
	why := "Retry-After of a year, a date a year ahead, 317 years, 7 s, then 200"
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 5, why)
	for i, gap := range srv.gaps() {
		if gap < cap || gap > 2*cap {
			t.Errorf("after %v the client waited %v; want between Cap = %v and %v\n"+
				"a Retry-After longer than Cap counts as Cap (and may get a little jitter on top): the server is still asked to wait, "+
				"but one header must not park the client for a year; mind the overflow of seconds × time.Second",
				srv.replies[i], gap, cap, 2*cap)
		}
	}
}

// --- Bodies, requests, limits ---

func (s *suite) closesDiscardedBodies(t *testing.T) {
	check := func(srv *server, returned int, why string) {
		t.Helper()
		srv.mu.Lock()
		defer srv.mu.Unlock()
		var bad []string
		for i, b := range srv.bodies {
			if i == returned {
				continue
			}
			if drained, closed := b.state(); !drained || !closed {
				bad = append(bad, fmt.Sprintf("attempt %d (%d): drained %v, closed %v", i+1, b.status, drained, closed))
			}
		}
		if len(bad) > 0 {
			t.Errorf("bodies of discarded responses: %s; want every one drained and closed\n%s: read a discarded body to the end "+
				"(io.Copy to io.Discard, within a limit) and close it, or its connection can never be reused and leaks",
				strings.Join(bad, "; "), why)
		}
	}
	srv := newServer(status(503), status(429), status(500), status(200))
	out := s.call(t, srv, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	if out.resp != nil {
		if _, closed := srv.bodies[len(srv.bodies)-1].state(); closed {
			t.Errorf("the body of the returned 200 response was closed; want it open for the caller to read")
		}
	}
	check(srv, 3, "the responses that were retried")
	wantResponse(t, out, 200, srv, "the script answers 503, 429, 500, then 200")

	srv = newServer(status(503))
	out = s.call(t, srv, Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	s.wantGaveUp(t, out, srv, "every attempt got 503 and MaxTries is 3")
	check(srv, -1, "a call that gives up returns no response, so the last one is discarded too")

	b := s.budget(t, 0)
	for i := 0; withdraw(t, b); i++ {
		if i > 1000 {
			t.Fatalf("NewRetryBudget(0) allowed over 1000 retries without a single first attempt; want at most BudgetBurst = %d", budgetBurst)
		}
	}
	srv = newServer(status(503), status(200))
	out = s.call(t, srv, Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true, Budget: b})
	s.wantGaveUp(t, out, srv, "the 503 could not be retried: the budget was empty")
	check(srv, -1, "a call refused a retry by its budget returns no response, so its response is discarded too")
}

func (s *suite) resendsRequest(t *testing.T) {
	const payload = `{"prompt": "hello", "max_tokens": 16}`
	ctx := context.WithValue(t.Context(), ctxKey{}, "the caller's ctx")
	req, err := http.NewRequest(http.MethodPost, "http://fakegpu.test/generate", strings.NewReader(payload))
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	req.Header.Set("X-Client-Id", "alice")
	srv := newServer(status(503), reply{err: refused()}, status(503), status(200))
	out := s.callCtx(t, ctx, srv, req, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	why := "a POST answered 503, connection refused, 503, then 200"
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 4, why)
	for i, a := range srv.attempts {
		if a.method != http.MethodPost || a.body != payload || a.header.Get("X-Client-Id") != "alice" {
			t.Errorf("attempt %d was %s with body %q and X-Client-Id %q; want POST with body %q and X-Client-Id \"alice\"\n"+
				"every attempt must be the whole request again: clone it, and take a fresh body from req.GetBody for every retry",
				i+1, a.method, a.body, a.header.Get("X-Client-Id"), payload)
		}
		if a.ctxValue != "the caller's ctx" {
			t.Errorf("attempt %d's context does not come from the ctx passed to CallWithRetries; want every attempt to be req.Clone(ctx)", i+1)
		}
	}

	// A body that cannot be produced again: no attempt may go out with
	// less than the whole body. Refusing to send, or sending once and not
	// retrying, are both fine.
	req, err = http.NewRequest(http.MethodPost, "http://fakegpu.test/generate", io.NopCloser(strings.NewReader(payload)))
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	if req.GetBody != nil {
		t.Fatalf("test setup: a request with an opaque body has GetBody set")
	}
	srv = newServer(status(503), status(200))
	out = s.callCtx(t, t.Context(), srv, req, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	if out.resp != nil {
		out.resp.Body.Close()
	}
	for i, a := range srv.attempts {
		if a.body != payload {
			t.Errorf("attempt %d of a request without GetBody went out with body %q; want %q or no attempt at all\n"+
				"a body is consumed by the attempt that sends it: without GetBody the request cannot be sent again", i+1, a.body, payload)
		}
	}
}

func (s *suite) stopsAfterMaxTries(t *testing.T) {
	srv := newServer(status(503))
	out := s.call(t, srv, Options{MaxTries: 4, Base: 100 * time.Millisecond, Cap: time.Second})
	why := "every attempt got 503 and MaxTries is 4"
	wantAttempts(t, srv, 4, why)
	s.wantGaveUp(t, out, srv, why)
	if code, ok := s.impl.StatusCode(out.err); !ok || code != 503 {
		t.Errorf("the error %q holds status (%d, %v); want (503, true): wrap the last failure, a *StatusError, so callers can see what it was", out.err, code, ok)
	}
	if want := 700 * time.Millisecond; out.took != want {
		t.Errorf("CallWithRetries took %v; want %v (100ms + 200ms + 400ms: no wait after the last attempt)", out.took, want)
	}

	srv = newServer(status(503))
	out = s.call(t, srv, Options{MaxTries: 1, Base: 100 * time.Millisecond, Cap: time.Second})
	wantAttempts(t, srv, 1, "MaxTries 1 means the first attempt and no retry")
	s.wantGaveUp(t, out, srv, "MaxTries 1 and the attempt got 503")
	if out.took != 0 {
		t.Errorf("CallWithRetries with MaxTries 1 took %v; want 0s (nothing to wait for)", out.took)
	}

	srv = newServer(reply{err: timeoutError{}})
	out = s.call(t, srv, Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	why = "every attempt timed out and MaxTries is 3"
	wantAttempts(t, srv, 3, why)
	s.wantGaveUp(t, out, srv, why)
	if !errors.As(out.err, new(timeoutError)) {
		t.Errorf("the error %q does not wrap the last attempt's timeout; want errors.As to find it", out.err)
	}
}

func (s *suite) stopsOnContextCancel(t *testing.T) {
	opts := Options{MaxTries: 5, Base: time.Hour, Cap: time.Hour}
	wantStopped := func(out outcome, srv *server, cause error, took time.Duration, why string) {
		t.Helper()
		if out.resp != nil {
			out.resp.Body.Close()
			t.Fatalf("CallWithRetries returned a %d response; want (nil, an error wrapping %v)\n%s", out.resp.StatusCode, cause, why)
		}
		if !errors.Is(out.err, cause) {
			t.Fatalf("CallWithRetries error = %v; want an error wrapping %v (ctx.Err())\n%s\nattempts:%s", out.err, cause, why, srv.history())
		}
		if out.took != took {
			t.Fatalf("CallWithRetries returned after %v; want %v\n%s: stop the moment ctx is done\nattempts:%s", out.took, took, why, srv.history())
		}
	}

	// Done during a wait of an hour.
	srv := newServer(status(503))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	out := s.callCtx(t, ctx, srv, newGet(t), opts)
	cancel()
	wantStopped(out, srv, context.DeadlineExceeded, 10*time.Second, "ctx expired 10 s into an hour's backoff")
	wantAttempts(t, srv, 1, "ctx expired during the first backoff")

	// Cancelled by someone else during a wait.
	srv = newServer(status(503))
	ctx, cancel = context.WithCancel(t.Context())
	stop := time.AfterFunc(2*time.Second, cancel)
	out = s.callCtx(t, ctx, srv, newGet(t), opts)
	stop.Stop()
	cancel()
	wantStopped(out, srv, context.Canceled, 2*time.Second, "ctx was cancelled 2 s into an hour's backoff")

	// Done during an attempt: it must not be retried.
	srv = newServer(reply{hang: true}, status(200))
	ctx, cancel = context.WithTimeout(t.Context(), 3*time.Second)
	out = s.callCtx(t, ctx, srv, newGet(t), Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
	cancel()
	if errors.Is(out.err, errHungAttempt) || out.took >= hangLimit {
		t.Fatalf("the attempt hung for an hour although ctx expired after 3s; want every attempt sent as req.Clone(ctx), so ctx ends it")
	}
	wantStopped(out, srv, context.DeadlineExceeded, 3*time.Second, "ctx expired during the first attempt, which got no answer")
	wantAttempts(t, srv, 1, "ctx expired during the first attempt: the transport's error is ctx's doing, not the server's, so do not retry it")

	// Done before the call: nothing to wait for, no retry.
	srv = newServer(status(503))
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	out = s.callCtx(t, ctx, srv, newGet(t), opts)
	wantStopped(out, srv, context.Canceled, 0, "ctx was done before the call")
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.attempts) > 1 || len(srv.attempts) == 1 && !srv.attempts[0].ctxDone {
		t.Fatalf("with ctx done before the call the server saw %d attempts; want none (or one cancelled by the transport)", len(srv.attempts))
	}
}

func (s *suite) onAttemptCalled(t *testing.T) {
	srv := newServer(status(503), reply{err: timeoutError{}}, status(429), status(200))
	out := s.call(t, srv, Options{MaxTries: 5, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true, OnAttempt: srv.onAttempt})
	wantResponse(t, out, 200, srv, "the script answers 503, a timeout, 429, then 200")
	want := strings.Repeat("OnAttempt send ", 4)
	if got := strings.Join(srv.events, " ") + " "; got != want {
		t.Fatalf("events: %s; want %s\ncall OnAttempt exactly once just before each attempt, the first one included", got, want)
	}

	srv = newServer(status(503))
	out = s.call(t, srv, Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Second, OnAttempt: srv.onAttempt})
	s.wantGaveUp(t, out, srv, "every attempt got 503 and MaxTries is 3")
	if got, want := strings.Join(srv.events, " ")+" ", strings.Repeat("OnAttempt send ", 3); got != want {
		t.Fatalf("events: %s; want %s\nOnAttempt runs for every attempt that is sent, and only for those", got, want)
	}
}

func (s *suite) budgetLimitsRetries(t *testing.T) {
	// The budget on its own.
	b := s.budget(t, 0.1)
	if got := countRetries(t, b, 1000); got > budgetBurst {
		t.Errorf("a new NewRetryBudget(0.1) allowed %d retries without any first attempt; want at most BudgetBurst = %d", got, budgetBurst)
	}
	b = s.budget(t, 0.1)
	for range 10000 {
		deposit(t, b)
	}
	if got := countRetries(t, b, 1000); got > budgetBurst || got < 1 {
		t.Errorf("after 10000 OnFirstAttempt and no retry, NewRetryBudget(0.1) allowed %d retries in a row; want 1 to BudgetBurst = %d\n"+
			"a quiet stretch must not bank retries for a later storm: the budget holds at most BudgetBurst", got, budgetBurst)
	}
	for _, ratio := range []float64{0.1, 0.5} {
		b := s.budget(t, ratio)
		allowed := 0
		const n = 1000
		for range n {
			deposit(t, b)
			if withdraw(t, b) {
				allowed++
			}
		}
		lo, hi := int(math.Floor(0.9*ratio*n)), int(ratio*n)+budgetBurst
		if allowed < lo || allowed > hi {
			t.Errorf("NewRetryBudget(%v) allowed %d retries over %d rounds of (OnFirstAttempt, TryRetry); want %d to %d (ratio × first attempts, plus at most BudgetBurst)",
				ratio, allowed, n, lo, hi)
		}
	}

	// Through CallWithRetries: 100 calls to a server that always fails.
	// Without the budget they would make 100 × 12 attempts.
	const calls, maxTries = 100, 12
	b = s.budget(t, 0.1)
	srv := newServer(status(503))
	refused := 0
	var slept time.Duration
	for range calls {
		before := srv.count()
		out := s.call(t, srv, Options{MaxTries: maxTries, Base: time.Second, Cap: time.Second, Budget: b})
		s.wantGaveUp(t, out, srv, "every attempt got 503 and the budget is shared by 100 such calls")
		made := srv.count() - before
		slept += out.took
		if made < maxTries {
			refused++
			if !errors.Is(out.err, s.impl.ErrBudgetExhausted) {
				t.Fatalf("a call that stopped after %d of %d tries returned %q; want an error wrapping ErrBudgetExhausted (and ErrGaveUp)", made, maxTries, out.err)
			}
			if code, ok := s.impl.StatusCode(out.err); !ok || code != 503 {
				t.Fatalf("a call refused by the budget returned %q, holding status (%d, %v); want (503, true): wrap the last failure", out.err, code, ok)
			}
		}
	}
	retries := srv.count() - calls
	if hi := calls/10 + budgetBurst; retries > hi || retries < calls/20 {
		t.Fatalf("%d calls that all failed, sharing NewRetryBudget(0.1), made %d retries; want %d to %d (10%% of first attempts, plus at most BudgetBurst = %d)\n"+
			"deposit on each call's first attempt, ask TryRetry before every retry, and fail at once when it says no",
			calls, retries, calls/20, hi, budgetBurst)
	}
	if want := time.Duration(retries) * time.Second; slept != want {
		t.Errorf("the %d calls spent %v waiting; want %v, one backoff of 1s per retry made\n"+
			"a call refused a retry must fail at once, without waiting first", calls, slept, want)
	}
	if refused == 0 {
		t.Errorf("no call was refused a retry; want most of the %d calls to fail fast once the budget is spent", calls)
	}
}

// countRetries calls TryRetry until it says no or limit calls said yes.
func countRetries(t *testing.T, b Budget, limit int) int {
	t.Helper()
	n := 0
	for n < limit && withdraw(t, b) {
		n++
	}
	return n
}

func (s *suite) budgetConcurrent(t *testing.T) {
	// No time passes: goroutines deposit and withdraw as fast as they can.
	// A budget without a lock loses updates (and -race reports it).
	const (
		goroutines = 8
		rounds     = 2000
		ratio      = 0.1
	)
	b := s.budget(t, ratio)
	var allowed atomic.Int64
	suitekit.Hammer(t, goroutines, "OnFirstAttempt or TryRetry", func(int) {
		for range rounds {
			b.OnFirstAttempt()
			if b.TryRetry() {
				allowed.Add(1)
			}
		}
	})
	total := goroutines * rounds
	lo, hi := int64(0.9*ratio*float64(total)), int64(ratio*float64(total))+budgetBurst
	if got := allowed.Load(); got < lo || got > hi {
		t.Errorf("%d goroutines × %d rounds of (OnFirstAttempt, TryRetry) on NewRetryBudget(%v) allowed %d retries; want %d to %d\n"+
			"the budget must be safe for concurrent use: hold a mutex while you read and change it", goroutines, rounds, ratio, got, lo, hi)
	}

	// Many calls at once, sharing one budget against a failing server.
	const calls, maxTries = 40, 6
	b = s.budget(t, ratio)
	srv := newServer(status(503))
	reqs := make([]*http.Request, calls)
	for i := range reqs {
		reqs[i] = newGet(t)
	}
	var failures atomic.Value
	suitekit.Hammer(t, calls, "CallWithRetries", func(g int) {
		out, msg := s.callWith(t.Context(), srv.client(), reqs[g], Options{MaxTries: maxTries, Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond, Jitter: true, Budget: b})
		if msg != "" {
			panic(suitekit.Failure(msg))
		}
		if out.resp != nil || !errors.Is(out.err, s.impl.ErrGaveUp) {
			failures.CompareAndSwap(nil, fmt.Sprintf("CallWithRetries = (%v, %v); want (nil, an error wrapping ErrGaveUp)", respStatus(out.resp), out.err))
		}
	})
	if msg := failures.Load(); msg != nil {
		t.Fatal(msg)
	}
	retries := srv.count() - calls
	if hi := int(ratio*calls) + budgetBurst; retries > hi {
		t.Errorf("%d concurrent calls that all failed, sharing NewRetryBudget(%v), made %d retries; want at most %d (%v × %d first attempts + BudgetBurst)",
			calls, ratio, retries, hi, ratio, calls)
	}
}

// --- A real server ---

// realServer runs CallWithRetries against an httptest server on loopback,
// in real time: four 503s then 200, and then a port where nothing listens.
func (s *suite) realServer(t *testing.T) {
	var requests, conns atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) <= 4 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/generate", nil)
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	// Waits of 20, 40, 80 and 160 ms leave the transport time to put each
	// drained connection back in its pool.
	out, failure := s.callWith(ctx, c, req, Options{MaxTries: 6, Base: 20 * time.Millisecond, Cap: time.Second, HonorRetryAfter: true})
	if failure != "" {
		t.Fatal(failure)
	}
	if out.err != nil || out.resp == nil || out.resp.StatusCode != 200 {
		t.Fatalf("against a real server answering 503 four times, then 200: CallWithRetries = (%v, %v); want a 200 response", respStatus(out.resp), out.err)
	}
	got, err := io.ReadAll(out.resp.Body)
	out.resp.Body.Close()
	if err != nil || string(got) != "ok" {
		t.Fatalf("the 200's body reads (%q, %v); want (\"ok\", <nil>)", got, err)
	}
	if n := requests.Load(); n != 5 {
		t.Errorf("the server got %d requests; want 5 (four 503s, then 200)", n)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 attempts used %d connections; want 1\n"+
			"read each discarded body to the end and close it: the transport then reuses its connection for the next attempt", n)
	}

	// Connection refused: a port where nothing listens any more.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/generate", nil)
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	var attempts atomic.Int64
	out, failure = s.callWith(ctx, c, req, Options{MaxTries: 3, Base: time.Millisecond, Cap: 10 * time.Millisecond, Jitter: true, OnAttempt: func() { attempts.Add(1) }})
	if failure != "" {
		t.Fatal(failure)
	}
	if out.resp != nil {
		out.resp.Body.Close()
		t.Fatalf("with nothing listening on %s CallWithRetries returned a %d response; want an error", addr, out.resp.StatusCode)
	}
	var op *net.OpError
	if !errors.Is(out.err, s.impl.ErrGaveUp) || !errors.As(out.err, &op) {
		t.Errorf("with nothing listening on %s CallWithRetries error = %v; want an error wrapping ErrGaveUp and the *net.OpError of the refused connection", addr, out.err)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("with nothing listening, %d attempts were made; want 3 (MaxTries): a refused connection is worth retrying", n)
	}
}
