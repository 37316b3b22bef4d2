package retrysuite

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// The server's address, drawn once per run from the run's seed, so that
// no code can tell the tests by it: testHost, and testURL with a path.
var testHost, testURL = endpoint()

func endpoint() (string, string) {
	r := mrand.New(mrand.NewPCG(suitekit.Seed(), 0x5eed))
	word := func(n int) string {
		const letters = "abcdefghijklmnopqrstuvwxyz"
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		return string(b)
	}
	host := []string{"http", "https"}[r.IntN(2)] + "://" + word(3+r.IntN(8)) + "." + []string{"com", "net", "io", "internal", "example.org"}[r.IntN(5)]
	if r.IntN(2) == 0 {
		host += ":" + strconv.Itoa(1024+r.IntN(60000))
	}
	return host, host + "/" + word(2+r.IntN(8))
}

// The package's documented defaults for the zero fields of RetryOptions.
const (
	defaultMaxTries = 12
	defaultBase     = 100 * time.Millisecond
	defaultCap      = 5 * time.Second
)

// settings are the options of a call with the defaults filled in.
type settings struct {
	maxTries  int
	base, cap time.Duration
	jitter    bool
	honour    bool
	timeout   time.Duration // the http.Client's Timeout, which ends a hanging attempt
}

func settingsOf(o Options, timeout time.Duration) settings {
	st := settings{maxTries: o.MaxTries, base: o.Base, cap: o.Cap, jitter: o.Jitter, honour: o.HonorRetryAfter, timeout: timeout}
	if st.maxTries <= 0 {
		st.maxTries = defaultMaxTries
	}
	if st.base <= 0 {
		st.base = defaultBase
	}
	if st.cap <= 0 {
		st.cap = defaultCap
	}
	return st
}

// mayPass is the model of which replies CallWithRetries retries: 429, 500,
// 502, 503, 504 and 529, timeouts (the client's own included), and refused,
// reset or early-closed connections.
func mayPass(r reply) bool {
	switch {
	case r.hang:
		return true
	case r.err != nil:
		var ne net.Error
		return errors.As(r.err, &ne) && ne.Timeout() ||
			errors.Is(r.err, syscall.ECONNREFUSED) || errors.Is(r.err, syscall.ECONNRESET) ||
			errors.Is(r.err, io.EOF) || errors.Is(r.err, io.ErrUnexpectedEOF)
	}
	switch r.status {
	case 429, 500, 502, 503, 504, 529:
		return true
	}
	return false
}

// expectation is what the model says a call does with a script.
type expectation struct {
	attempts int
	last     reply // the reply to the last attempt
	gaveUp   bool  // the last reply was worth retrying, but MaxTries was reached
}

func expect(script []reply, st settings) expectation {
	for i := 0; ; i++ {
		r := script[min(i, len(script)-1)]
		if !mayPass(r) {
			return expectation{attempts: i + 1, last: r}
		}
		if i+1 >= st.maxTries {
			return expectation{attempts: i + 1, last: r, gaveUp: true}
		}
	}
}

// addSat is a+b for durations that are not negative, saturating at the
// largest Duration.
func addSat(a, b time.Duration) time.Duration {
	if a > lab.InfDuration-b {
		return lab.InfDuration
	}
	return a + b
}

// secondsSat is n seconds, saturating at the largest Duration.
func secondsSat(n *big.Int) time.Duration {
	ns := new(big.Int).Mul(n, big.NewInt(int64(time.Second)))
	if !ns.IsInt64() {
		return lab.InfDuration
	}
	return time.Duration(ns.Int64())
}

// floorOf is the model of a Retry-After header's floor for an answer sent at
// at: whole seconds of any number of digits (saturating), or an HTTP date
// after at, capped at cap. A number in another form (a fraction, a sign, an
// exponent) is not RFC 9110's delay-seconds: the suite accepts ignoring it
// or honouring its value, and says so with lenient.
func floorOf(header string, at time.Time, cap time.Duration) (floor time.Duration, lenient bool) {
	if header == "" {
		return 0, false
	}
	if strings.Trim(header, "0123456789") == "" {
		n, _ := new(big.Int).SetString(header, 10)
		return min(secondsSat(n), cap), false
	}
	if when, err := http.ParseTime(header); err == nil {
		return min(max(when.Sub(at), 0), cap), false
	}
	if v, err := strconv.ParseFloat(header, 64); err == nil && v > 0 {
		if v*float64(time.Second) >= math.MaxInt64 {
			return cap, true
		}
		return min(time.Duration(v*float64(time.Second)), cap), true
	}
	return 0, false
}

// waitRange is the model of the wait before retry n+1: the backoff
// BackoffDelay(n, base, cap, jitter), or with a Retry-After floor f the
// longer of the backoff and f plus up to max(f/5, 1s).
func waitRange(n int, st settings, header string, at time.Time) (lo, hi time.Duration, why string) {
	c := ceilingOf(n, st.base, st.cap)
	lo, hi = c, c
	why = fmt.Sprintf("the backoff BackoffDelay(%d, %v, %v, false) = %v", n, st.base, st.cap, c)
	if st.jitter {
		lo = 0
		why = fmt.Sprintf("the backoff BackoffDelay(%d, %v, %v, true), in [0, %v]", n, st.base, st.cap, c)
	}
	if !st.honour {
		if header != "" {
			why += ", Retry-After ignored since HonorRetryAfter is false"
		}
		return lo, hi, why
	}
	f, lenient := floorOf(header, at, st.cap)
	if f <= 0 {
		if header != "" {
			why += fmt.Sprintf(", Retry-After %q asking for no wait", header)
		}
		return lo, hi, why
	}
	extra := max(f/5, time.Second)
	top := addSat(f, extra)
	if lenient {
		return lo, max(hi, top), fmt.Sprintf("%s, or, if Retry-After %q is read as %v (it is not whole seconds, so it may be ignored), "+
			"the longer of that and %v plus up to %v", why, header, f, f, extra)
	}
	return max(lo, f), max(hi, top), fmt.Sprintf("the longer of %s and the Retry-After floor %v (from %q, capped at Cap = %v) plus a random extra of up to %v",
		why, f, header, st.cap, extra)
}

// attemptTime is how long the model's attempt takes before its answer: a
// hanging reply lasts until the client's Timeout.
func attemptTime(r reply, st settings) time.Duration {
	if r.hang {
		return st.timeout
	}
	return 0
}

// --- Judging a call against the model ---

// judge compares what a call did (out, the attempts srv saw, started at
// start) with the model, and returns what is wrong, if anything.
func (s *suite) judge(out outcome, srv *server, script []reply, st settings, start time.Time, onAttempt bool) string {
	exp := expect(script, st)
	srv.mu.Lock()
	attempts := append([]seen(nil), srv.attempts...)
	events := append([]string(nil), srv.events...)
	srv.mu.Unlock()
	setting := fmt.Sprintf("MaxTries %d, Base %v, Cap %v, Jitter %v, HonorRetryAfter %v", st.maxTries, st.base, st.cap, st.jitter, st.honour)
	if st.timeout > 0 {
		setting += fmt.Sprintf(", the http.Client's Timeout %v", st.timeout)
	}
	ctxt := func() string {
		return fmt.Sprintf("\nsettings (defaults filled in): %s\nattempts:%s", setting, srv.history())
	}

	if len(attempts) != exp.attempts {
		why := fmt.Sprintf("the answer to attempt %d, %v, ", exp.attempts, exp.last)
		switch {
		case exp.gaveUp:
			why += fmt.Sprintf("is worth retrying, but it was the MaxTries-th (%d)", st.maxTries)
		case mayPass(exp.last):
			why += "is worth retrying"
		default:
			why += "is not worth retrying: return it at once"
		}
		return fmt.Sprintf("the server saw %d attempts; want %d: %s\n"+
			"retry 429, 500, 502, 503, 504, 529, timeouts and refused, reset or early-closed connections, nothing else, up to MaxTries attempts%s",
			len(attempts), exp.attempts, why, ctxt())
	}
	if attempts[0].at != start {
		return fmt.Sprintf("the first attempt went out %v after the call; want at once%s", attempts[0].at.Sub(start), ctxt())
	}
	for i := 0; i+1 < len(attempts); i++ {
		r := script[min(i, len(script)-1)]
		lo, hi, why := waitRange(i, st, attempts[i].retryAfter, attempts[i].at)
		took := attemptTime(r, st)
		gap := attempts[i+1].at.Sub(attempts[i].at)
		if wait := gap - took; wait < lo || wait > hi {
			what := "waited"
			if took > 0 {
				what = fmt.Sprintf("waited (after the attempt's own %v)", took)
			}
			return fmt.Sprintf("after attempt %d (%v) the client %s %v before retrying; want %v to %v: %s%s",
				i+1, r, what, gap-took, lo, hi, why, ctxt())
		}
	}
	last := attempts[len(attempts)-1]
	if want := last.at.Sub(start) + attemptTime(exp.last, st); out.took != want {
		return fmt.Sprintf("CallWithRetries returned %v after it was called; want %v, when the last attempt's answer came: "+
			"there is no wait after the last attempt%s", out.took, want, ctxt())
	}
	if onAttempt {
		if got, want := strings.Join(events, " ")+" ", strings.Repeat("OnAttempt send ", len(attempts)); got != want {
			return fmt.Sprintf("events: %s; want %s\ncall OnAttempt exactly once just before each attempt, the first one included%s", got, want, ctxt())
		}
	}
	if msg := bodiesDiscarded(attempts, exp); msg != "" {
		return msg + ctxt()
	}

	switch {
	case exp.gaveUp:
		if out.resp != nil {
			out.resp.Body.Close()
			return fmt.Sprintf("CallWithRetries returned a %d response; want (nil, an error wrapping ErrGaveUp and the last failure)%s", out.resp.StatusCode, ctxt())
		}
		if !errors.Is(out.err, s.impl.ErrGaveUp) {
			return fmt.Sprintf("CallWithRetries error = %v; want an error wrapping ErrGaveUp%s", out.err, ctxt())
		}
		if errors.Is(out.err, s.impl.ErrBudgetExhausted) {
			return fmt.Sprintf("CallWithRetries error = %v; it wraps ErrBudgetExhausted, but the call had no budget%s", out.err, ctxt())
		}
		return s.wrapsLast(out.err, exp.last, ctxt())
	case exp.last.status != 0:
		if out.err != nil || out.resp == nil {
			return fmt.Sprintf("CallWithRetries = (%v, %v); want the %d response and no error%s", respStatus(out.resp), out.err, exp.last.status, ctxt())
		}
		defer out.resp.Body.Close()
		if out.resp.StatusCode != exp.last.status {
			return fmt.Sprintf("CallWithRetries returned status %d; want %d%s", out.resp.StatusCode, exp.last.status, ctxt())
		}
		if last.resp != nil {
			if _, closed := last.resp.state(); closed {
				return fmt.Sprintf("the body of the returned %d response was closed; want it open for the caller to read%s", exp.last.status, ctxt())
			}
		}
		got, err := io.ReadAll(out.resp.Body)
		if want := exp.last.content(); err != nil || string(got) != string(want) {
			return fmt.Sprintf("the returned response's body reads %d bytes (error %v); want the %d bytes the server sent, untouched: "+
				"return the response as the transport gave it%s", len(got), err, len(want), ctxt())
		}
	default:
		if out.resp != nil {
			out.resp.Body.Close()
			return fmt.Sprintf("CallWithRetries returned a %d response; want (nil, the transport's error)%s", out.resp.StatusCode, ctxt())
		}
		if !errors.Is(out.err, exp.last.err) {
			return fmt.Sprintf("CallWithRetries error = %v; want an error wrapping the transport's %q%s", out.err, exp.last.err, ctxt())
		}
		if errors.Is(out.err, s.impl.ErrGaveUp) {
			return fmt.Sprintf("CallWithRetries error = %v wraps ErrGaveUp; want the transport's error as it is: "+
				"the call did not give up, the error was not worth retrying%s", out.err, ctxt())
		}
	}
	return ""
}

// wrapsLast checks that err, from a call that gave up, holds its last
// failure r: the *StatusError of its status, or the transport's error.
func (s *suite) wrapsLast(err error, r reply, ctxt string) string {
	switch {
	case r.hang:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return fmt.Sprintf("CallWithRetries error = %v; want it to wrap the last attempt's timeout (a net.Error whose Timeout() is true)%s", err, ctxt)
		}
	case r.err != nil:
		if !errors.Is(err, r.err) {
			return fmt.Sprintf("CallWithRetries error = %v; want it to wrap the last attempt's error %q%s", err, r.err, ctxt)
		}
	default:
		if code, ok := s.impl.StatusCode(err); !ok || code != r.status {
			return fmt.Sprintf("CallWithRetries error = %q holds status (%d, %v); want (%d, true): wrap the last failure, a *StatusError%s", err, code, ok, r.status, ctxt)
		}
		if line := statusLine(r.status); !strings.Contains(err.Error(), line) {
			return fmt.Sprintf("CallWithRetries error = %q does not name the last status line, %q: a *StatusError's Error returns the response's status line%s", err, line, ctxt)
		}
	}
	return ""
}

// bodiesDiscarded checks that the body of every answer but the returned
// one was closed, and read to its end if it was no longer than 64 KiB, and
// that no more than a megabyte of any was read.
func bodiesDiscarded(attempts []seen, exp expectation) string {
	var bad []string
	for i, a := range attempts {
		if a.resp == nil || i == len(attempts)-1 && !exp.gaveUp && exp.last.status != 0 {
			continue // no body, or the returned response's
		}
		drained, closed := a.resp.state()
		if read := a.resp.bytesRead(); read > 1<<20 {
			bad = append(bad, fmt.Sprintf("attempt %d's (%d): %d bytes read", i+1, a.resp.status, read))
		} else if !drained || !closed {
			bad = append(bad, fmt.Sprintf("attempt %d's (%d, %d bytes): %d bytes read, closed %v", i+1, a.resp.status, len(a.resp.data), read, closed))
		}
	}
	if len(bad) > 0 {
		return fmt.Sprintf("bodies of discarded responses: %s; want every one closed, read to the end first if it is 64 KiB or less, "+
			"and never more than 64 KiB of it read\nread a discarded body within a limit (io.Copy to io.Discard from an io.LimitReader) and close it: "+
			"a drained connection can be reused, and a body may never end", strings.Join(bad, "; "))
	}
	return ""
}

// --- Drawing scripts ---

// retryableStatuses are the statuses CallWithRetries retries.
var retryableStatuses = []int{429, 500, 502, 503, 504, 529}

// drawFinalStatus draws a status that CallWithRetries returns at once: a
// success, or any 4xx or 5xx but the six it retries.
func drawFinalStatus(rt *rapid.T, label string) int {
	return rapid.OneOf(
		rapid.SampledFrom([]int{200, 201, 204, 400, 401, 403, 404, 405, 408, 409, 413, 422, 425, 451, 501, 505, 507, 511}),
		rapid.IntRange(200, 299),
		rapid.IntRange(400, 499).Filter(func(c int) bool { return !mayPass(status(c)) }),
		rapid.IntRange(500, 599).Filter(func(c int) bool { return !mayPass(status(c)) }),
	).Draw(rt, label)
}

// retryableErrors returns fresh errors of every kind worth retrying.
func retryableErrors() []error {
	return []error{
		timeoutError{},
		&net.OpError{Op: "read", Net: "tcp", Addr: fakeAddr{}, Err: os.ErrDeadlineExceeded},
		refused(),
		reset(),
		io.EOF,
		fmt.Errorf("readLoopPeekFailLocked: %w", io.ErrUnexpectedEOF),
	}
}

// customError is an error of the request itself, not the connection.
type customError struct{ what string }

func (e *customError) Error() string { return e.what + " (scripted)" }

// finalErrors returns fresh errors that are not worth retrying.
func finalErrors() []error {
	return []error{
		errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority (scripted)"),
		&customError{"http: server gave HTTP response to HTTPS client"},
		fmt.Errorf("proxyconnect tcp: %w", &customError{"proxy refused the tunnel: 403 Forbidden"}),
	}
}

// dateAhead returns, as an HTTP date in form f, the whole second secs
// seconds after now's (secs may be more seconds than a Duration holds).
func dateAhead(now time.Time, secs int64, f suitekit.HTTPDateForm) string {
	s, _ := suitekit.FormatHTTPDate(time.Unix(now.Unix()+secs, 0), now, f)
	return s
}

// drawRetryAfter draws a Retry-After header in every form: none, whole
// seconds (leading zeros, huge numbers of digits), HTTP dates ahead and
// past in each of the three forms RFC 9110 allows, and values in neither
// form.
func drawRetryAfter(rt *rapid.T, label string, cap time.Duration) (string, func(time.Time) string) {
	capSecs := int64(min(cap, 1000*time.Hour) / time.Second)
	switch rapid.IntRange(0, 9).Draw(rt, label+" form") {
	case 0, 1:
		return "", nil
	case 2, 3:
		n := rapid.Int64Range(0, 2*capSecs+3).Draw(rt, label+" seconds")
		return strconv.FormatInt(n, 10), nil
	case 4:
		digits := rapid.IntRange(11, 40).Draw(rt, label+" digits")
		var b strings.Builder
		b.WriteByte(byte('1' + rapid.IntRange(0, 8).Draw(rt, label+" first digit")))
		for range digits - 1 {
			b.WriteByte(byte('0' + rapid.IntRange(0, 9).Draw(rt, label+" digit")))
		}
		return b.String(), nil
	case 5, 6:
		ahead := rapid.OneOf(rapid.Int64Range(1, 2*capSecs+3), rapid.Int64Range(1, 300*365*24*3600)).Draw(rt, label+" date ahead")
		form := suitekit.HTTPDateForms().Draw(rt, label+" date form")
		return "", func(now time.Time) string {
			return dateAhead(now, ahead, form)
		}
	case 7:
		ago := rapid.Int64Range(1, 10*365*24*3600).Draw(rt, label+" date ago")
		form := suitekit.HTTPDateForms().Draw(rt, label+" date form")
		return "", func(now time.Time) string {
			return dateAhead(now, -ago, form)
		}
	case 8:
		return rapid.SampledFrom([]string{"soon", "-3", "-1", "3s", "1,5", "one", "Fri", "2 3", "later please", "0", "00"}).Draw(rt, label+" garbage"), nil
	}
	return rapid.SampledFrom([]string{"1.5", "2.25", "0.5", "+3", "1e1", "1e30", "7.0", "Inf"}).Draw(rt, label+" lenient"), nil
}
