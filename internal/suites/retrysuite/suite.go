// Package retrysuite is the one test suite of task 4 (backoff with full
// jitter, a retry loop that honours Retry-After, a retry budget). The
// exercise and the reference solution each run it through a thin adapter,
// so both are held to exactly the same checks. Learners do not edit it.
//
// Every check is a subtest of Run with a fixed name, such as
// TestRetry/FullJitterIsUniform:
//
//	BackoffBounds              BackoffDelay against an exact model, for random attempts, bases and caps
//	BackoffCap                 the delay reaches the cap where the doubling passes it, and stays
//	BackoffNoOverflow          base×2^attempt past the largest Duration saturates at the cap
//	FullJitterIsUniform        jittered delays pass a Kolmogorov–Smirnov test (on the real clock and in a bubble)
//	BackoffConcurrent          the same for delays drawn by many goroutines at once (and -race)
//	RetriesRetryableStatuses   429, 500, 502, 503, 504 and 529 are retried
//	NeverRetries4xx            other 2xx, 4xx and 5xx come back at once, as they are (random statuses too)
//	RetriesTimeouts            timeouts are retried, the client's own included
//	RetriesConnectionErrors    refused, reset and early-closed connections and timeouts, at random, are retried
//	NeverRetriesOtherErrors    other transport errors come back at once
//	FollowsTheModel            random scripts and options: every attempt, wait, body and error as the model says
//	BackoffBetweenAttempts     the waits are BackoffDelay(0), (1), ... for random options
//	RetryAfterSecondsFloor     Retry-After in seconds is a floor: backoffs longer and shorter than it
//	RetryAfterDateFloor        the same for an HTTP date
//	RetryAfterJittered         clients told the same Retry-After spread out, within its extra
//	RetryAfterCapped           a Retry-After beyond Cap counts as Cap, however large, without overflow
//	ClosesDiscardedBodies      every body not returned is closed, and drained within a limit
//	ResendsRequest             every attempt carries the method, URL, headers, body and ctx
//	StopsAfterMaxTries         MaxTries attempts (12 for zero), then ErrGaveUp with the last failure
//	StopsOnContextCancel       a done ctx ends the call at once, wait or attempt, at random instants
//	OnAttemptCalled            OnAttempt runs just before every attempt
//	BudgetLimitsRetries        the budget against an exact model, alone and through calls
//	BudgetConcurrent           ratio × first attempts + BudgetBurst under many goroutines (and -race)
//	BudgetConcurrentRealClock  the same on the real clock, outside any bubble
//	RealServer                 retries against a real loopback server
//
// Most inputs are drawn at random on every run from the run's seed
// (suitekit.Property, suitekit.Rand), and compared with a model of the
// contract (model.go, budget.go), with a few fixed cases that say what is
// meant. Each failure prints the seed and how to replay it.
//
// Checks with fixed inputs run inside a testing/synctest bubble, and each
// random case in a bubble of its own: time.Now is fake and a sleep or
// timer only moves the fake clock, so waits of seconds or years are
// measured exactly and cost nothing. A bubble's clock starts at a random
// instant up to 2040 and ends in 2262 (a timer past that end fires at it),
// so no check sleeps for more than a few decades. Real sockets do not move
// fake time, so inside the bubbles the http.Client's Transport is an
// in-memory RoundTripper that answers each attempt from a script: a status
// with headers and a body that records how much of it was read and whether
// it was closed (it may fail halfway or never end), or an error (a timeout,
// a refused or reset connection, an early EOF), or a hang until the
// request's context is done. Pure functions and locks are also checked on
// the real clock, outside any bubble. RealServer uses httptest on
// loopback, in real time, with millisecond waits.
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
	// ZeroBudget returns a new zero RetryBudget (new(RetryBudget)).
	ZeroBudget func() Budget
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
	if impl.BackoffDelay == nil || impl.CallWithRetries == nil || impl.NewRetryBudget == nil || impl.ZeroBudget == nil ||
		impl.ErrGaveUp == nil || impl.ErrBudgetExhausted == nil || impl.StatusCode == nil {
		t.Fatalf("retrysuite.Run: Impl has a nil field (%+v); want all of them set", impl)
	}
	s := &suite{impl: impl}
	// Each check has a part with fixed inputs, run in a synctest bubble,
	// and a part that runs outside one: random properties, each case in
	// a bubble of its own, and checks on the real clock.
	checks := []struct {
		name    string
		fixed   func(*testing.T) // in a bubble, if not nil
		outside func(*testing.T) // outside a bubble, if not nil
	}{
		{"BackoffBounds", nil, s.backoffBounds},
		{"BackoffCap", nil, s.backoffCap},
		{"BackoffNoOverflow", nil, s.backoffNoOverflow},
		{"FullJitterIsUniform", nil, s.fullJitterIsUniform},
		{"BackoffConcurrent", nil, s.backoffConcurrent},
		{"RetriesRetryableStatuses", s.retriesRetryableStatuses, nil},
		{"NeverRetries4xx", s.neverRetries4xx, s.neverRetriesRandom},
		{"RetriesTimeouts", s.retriesTimeouts, nil},
		{"RetriesConnectionErrors", s.retriesConnectionErrors, s.retriesErrorsRandom},
		{"NeverRetriesOtherErrors", s.neverRetriesOtherErrors, nil},
		{"FollowsTheModel", nil, s.followsTheModel},
		{"BackoffBetweenAttempts", s.backoffBetweenAttempts, s.backoffBetweenAttemptsRandom},
		{"RetryAfterSecondsFloor", s.retryAfterSecondsFloor, func(t *testing.T) { s.retryAfterRegimes(t, false) }},
		{"RetryAfterDateFloor", s.retryAfterDateFloor, func(t *testing.T) { s.retryAfterRegimes(t, true) }},
		{"RetryAfterJittered", s.retryAfterJittered, nil},
		{"RetryAfterCapped", s.retryAfterCapped, s.retryAfterCappedRandom},
		{"ClosesDiscardedBodies", s.closesDiscardedBodies, s.discardedBodiesRandom},
		{"ResendsRequest", s.resendsRequest, s.resendsRandomRequests},
		{"StopsAfterMaxTries", s.stopsAfterMaxTries, s.stopsAfterMaxTriesRandom},
		{"StopsOnContextCancel", s.stopsOnContextCancel, s.stopsOnContextRandom},
		{"OnAttemptCalled", s.onAttemptCalled, nil},
		{"BudgetLimitsRetries", s.budgetLimitsRetries, func(t *testing.T) { s.budgetMatchesTheModel(t); s.budgetThroughCalls(t) }},
		{"BudgetConcurrent", s.budgetConcurrent, nil},
		{"BudgetConcurrentRealClock", nil, s.budgetConcurrentRealClock},
		{"RealServer", nil, s.realServer},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.fixed != nil {
				suitekit.Bubble(t, c.fixed)
			}
			if c.outside != nil && !t.Failed() {
				c.outside(t)
			}
		})
	}
}

type suite struct {
	impl Impl
}

// --- Calling the code under test ---

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
	req, err := http.NewRequest(http.MethodGet, testURL, nil)
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
	bodySize   int  // the body's length in bytes; 0 means the status text
	bodyFails  bool // reading the body fails halfway, as a reset connection does
	endless    bool // the body never ends (the suite stops feeding it at endlessLimit)
}

func (r reply) String() string {
	switch {
	case r.err != nil:
		return fmt.Sprintf("error %q", r.err)
	case r.hang:
		return "no answer until the request's context is done"
	case r.retryAfter != "":
		return fmt.Sprintf("%d with Retry-After: %s", r.status, r.retryAfter)
	case r.retryAt != nil:
		return fmt.Sprintf("%d with Retry-After as an HTTP date", r.status)
	case r.endless:
		return fmt.Sprintf("%d with a body that never ends", r.status)
	case r.bodySize > 0:
		return fmt.Sprintf("%d with a body of %d bytes", r.status, r.bodySize)
	}
	return fmt.Sprint(r.status)
}

// content returns the body a reply sends (for an endless body, its start).
func (r reply) content() []byte {
	if r.bodySize == 0 && !r.endless {
		if r.status == http.StatusOK {
			return []byte("ok")
		}
		return []byte(http.StatusText(r.status) + "\n")
	}
	n := r.bodySize
	if r.endless {
		n = 4096
	}
	b := make([]byte, n)
	const pattern = "the server's answer, again and again; "
	for i := range b {
		b[i] = pattern[(i+r.status)%len(pattern)]
	}
	return b
}

func status(code int) reply { return reply{status: code} }

// hangLimit is how long a hanging reply waits for a context that is never
// done before it gives up, so a call that does not pass its ctx to the
// attempt fails with a clear message instead of deadlocking the bubble.
const hangLimit = time.Hour

var errHungAttempt = errors.New("retrysuite: the attempt hung for an hour: its context was never done")

// statusLine is the status line the scripted server answers code with:
// net/http's text where it has one, else a reason phrase of the server's
// own, as Anthropic's API answers "529 Overloaded".
func statusLine(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("%d %s", code, text)
	}
	return fmt.Sprintf("%d Overloaded", code)
}

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

// seen is one attempt as the server received it, and what it answered.
type seen struct {
	at         time.Time
	method     string
	url        string
	header     http.Header
	body       string
	ctxValue   any
	ctxDone    bool   // the request's context was already done
	retryAfter string // the Retry-After header of the answer
	resp       *body  // the body of the answer, if it was a response
}

type ctxKey struct{}

func newServer(replies ...reply) *server {
	return &server{replies: replies, start: time.Now()}
}

func (s *server) client() *http.Client { return &http.Client{Transport: s} }

func (s *server) RoundTrip(req *http.Request) (*http.Response, error) {
	a := seen{at: time.Now(), method: req.Method, url: req.URL.String(), header: req.Header.Clone(), ctxValue: req.Context().Value(ctxKey{}), ctxDone: req.Context().Err() != nil}
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
	data := r.content()
	b := &body{data: data, status: r.status, endless: r.endless, failAt: -1}
	if r.bodyFails {
		b.failAt = len(data) / 2
	}
	length := int64(len(data))
	if r.endless {
		length = -1
	}
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	if r.retryAfter != "" {
		h.Set("Retry-After", r.retryAfter)
	}
	if r.retryAt != nil {
		h.Set("Retry-After", r.retryAt(a.at))
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.attempts[n].retryAfter = h.Get("Retry-After")
	s.attempts[n].resp = b
	s.mu.Unlock()
	return &http.Response{
		Status:     statusLine(r.status),
		StatusCode: r.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          b,
		ContentLength: length,
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
// closed. It may fail halfway, as a reset connection does, or never end.
type body struct {
	status  int
	data    []byte // the content; an endless body repeats it for ever
	endless bool
	failAt  int // reading fails once this many bytes were read; -1: never

	mu     sync.Mutex
	read   int // bytes read so far
	failed bool
	closed bool
}

// endlessLimit is how much of an endless body the suite hands out before
// it fails the read, so that code which reads it to the end fails the
// check instead of spinning until the test times out.
const endlessLimit = 16 << 20

// maxDrain is the most of a discarded body the package reads before
// closing it, as CallWithRetries documents: 64 KiB.
const maxDrain = 64 << 10

var (
	errBodyReset   = errors.New("read: connection reset by peer (scripted, while reading the body)")
	errEndlessBody = errors.New("retrysuite: 16 MiB read from a body that never ends; the suite stopped it")
)

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return 0, errors.New("read on a closed body")
	case b.failAt >= 0 && b.read >= b.failAt:
		b.failed = true
		return 0, errBodyReset
	case b.endless && b.read >= endlessLimit:
		return 0, errEndlessBody
	case !b.endless && b.read >= len(b.data):
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		if b.failAt >= 0 && b.read == b.failAt || b.endless && b.read == endlessLimit {
			break
		}
		i := b.read
		if b.endless {
			i %= len(b.data)
		} else if i >= len(b.data) {
			break
		}
		c := copy(p[n:], b.data[i:])
		if b.failAt >= 0 {
			c = min(c, b.failAt-b.read)
		}
		if b.endless {
			c = min(c, endlessLimit-b.read)
		}
		n += c
		b.read += c
	}
	return n, nil
}

func (b *body) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// state reports whether the body was drained as far as CallWithRetries
// promises (a body of up to 64 KiB to its end or to its failure; a longer
// one may be dropped with its connection), and whether it was closed.
func (b *body) state() (drained, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	long := b.endless || len(b.data) > maxDrain
	return long || b.failed || b.read >= len(b.data), b.closed
}

// bytesRead is how much of the body was read.
func (b *body) bytesRead() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read
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

// retryAfterGap runs one call against srv (a reply with Retry-After, then
// 200) and returns the wait between the two attempts.
func (s *suite) retryAfterGap(t *testing.T, srv *server, opts Options, why string) time.Duration {
	t.Helper()
	out := s.call(t, srv, opts)
	wantResponse(t, out, 200, srv, why)
	wantAttempts(t, srv, 2, why)
	return srv.gaps()[0]
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
	req, err := http.NewRequest(http.MethodPost, testURL, strings.NewReader(payload))
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

	// req's own context does not govern the call, ctx does: a request
	// made with a context that is already cancelled still goes out.
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	req, err = http.NewRequestWithContext(dead, http.MethodGet, testURL, nil)
	if err != nil {
		t.Fatalf("test setup: %v", err)
	}
	srv = newServer(status(503), status(200))
	out = s.callCtx(t, t.Context(), srv, req, Options{MaxTries: 3, Base: 100 * time.Millisecond, Cap: time.Second})
	wantResponse(t, out, 200, srv, "req was made with a context that is already cancelled, and the ctx passed to CallWithRetries is live: "+
		"every attempt is req.Clone(ctx), so ctx, not req's own context, governs the call")

	// A body that cannot be produced again: no attempt may go out with
	// less than the whole body. Refusing to send, or sending once and not
	// retrying, are both fine.
	req, err = http.NewRequest(http.MethodPost, testURL, io.NopCloser(strings.NewReader(payload)))
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
	// The zero value allows no retries, however many first attempts it saw.
	{
		rng := suitekit.Rand(t)
		b := s.impl.ZeroBudget()
		firsts := rng.IntN(1000)
		var retried bool
		if r, stack := suitekit.Catch(func() {
			for range firsts {
				b.OnFirstAttempt()
			}
			retried = b.TryRetry()
		}); r != nil {
			t.Fatal(suitekit.PanicReport(fmt.Sprintf("%d OnFirstAttempt() then TryRetry() on the zero RetryBudget", firsts), r, stack))
		}
		if retried {
			t.Fatalf("the zero RetryBudget allowed a retry after %d first attempts; want none: its doc comment promises that the zero value allows no retries", firsts)
		}
	}
	// The budget on its own.
	// A new budget starts full: exactly BudgetBurst whole retries, whatever
	// its ratio, before any first attempt has deposited anything.
	rng := suitekit.Rand(t)
	for _, ratio := range []float64{0, 0.1, float64(rng.IntN(30_001)) / 1000, math.Inf(1)} {
		b := s.budget(t, ratio)
		if got := countRetries(t, b, 1000); got != budgetBurst {
			t.Errorf("a new NewRetryBudget(%v) allowed %d retries in a row without any first attempt; want exactly BudgetBurst = %d\n"+
				"a budget starts full, holding BudgetBurst whole retries, and TryRetry allows one while a whole one is there", ratio, got, budgetBurst)
		}
	}
	b := s.budget(t, 0.1)
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
