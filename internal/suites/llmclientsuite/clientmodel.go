package llmclientsuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/provider"
)

// The package's documented defaults and limits.
const (
	defaultMaxInFlight    = 8
	defaultMaxAttempts    = 6
	defaultAttemptTimeout = 10 * time.Minute
	defaultBaseBackoff    = 500 * time.Millisecond
	defaultMaxBackoff     = 8 * time.Second
	burstWindow           = 20 * time.Millisecond
	maxHold               = time.Minute
	apiVersion            = "2023-06-01"
	defaultBaseURL        = "https://api.anthropic.com"
	infDuration           = time.Duration(math.MaxInt64)
)

// settings are a client's options with the defaults filled in.
type settings struct {
	maxAttempts    int
	attemptTimeout time.Duration
	base, max      time.Duration
	maxInFlight    int
}

func settingsOf(o Options) settings {
	st := settings{maxAttempts: o.MaxAttempts, attemptTimeout: o.AttemptTimeout, base: o.BaseBackoff, max: o.MaxBackoff, maxInFlight: o.MaxInFlight}
	if st.maxAttempts <= 0 {
		st.maxAttempts = defaultMaxAttempts
	}
	if st.attemptTimeout <= 0 {
		st.attemptTimeout = defaultAttemptTimeout
	}
	if st.base <= 0 {
		st.base = defaultBaseBackoff
	}
	if st.max <= 0 {
		st.max = defaultMaxBackoff
	}
	if st.maxInFlight <= 0 {
		st.maxInFlight = defaultMaxInFlight
	}
	return st
}

// ceiling is the model of the backoff's ceiling before retry k:
// min(MaxBackoff, BaseBackoff × 2^k), worked out exactly.
func (st settings) ceiling(k int) time.Duration {
	if k > 64 {
		return st.max
	}
	x := new(big.Int).Lsh(big.NewInt(int64(st.base)), uint(k))
	if x.Cmp(big.NewInt(int64(st.max))) > 0 {
		return st.max
	}
	return time.Duration(x.Int64())
}

func addSat(a, b time.Duration) time.Duration {
	if a > infDuration-b {
		return infDuration
	}
	return a + b
}

// mayPass is the model of which answers Create retries: timeouts,
// connection errors, 408, 429 (but the spend limit), 529 and every 5xx.
func mayPass(r reply) bool {
	switch {
	case r.hang || r.netErr != nil:
		return true
	case r.status == 0 || r.status == http.StatusOK:
		return false
	case r.errCode == provider.ErrorCodeSpendLimit:
		return false
	}
	return r.status == http.StatusRequestTimeout || r.status == http.StatusTooManyRequests || r.status >= 500
}

// floorOf is the model of the retry-after floor of an answer that arrived
// at when: the header as APIError.RetryAfter reads it, capped at MaxHold.
func floorOf(header string, when time.Time) time.Duration {
	return min(provider.ParseRetryAfter(header, when), maxHold)
}

// waitRange is the model of the wait before retry k after an answer with
// retry-after header that arrived at when: full jitter in [0, ceiling],
// or with a floor f, the longer of that and f plus up to BaseBackoff.
func (st settings) waitRange(k int, header string, when time.Time) (lo, hi time.Duration, why string) {
	c := st.ceiling(k)
	why = fmt.Sprintf("the full-jitter backoff before retry %d, in [0, min(MaxBackoff, BaseBackoff×2^%d)] = [0, %v]", k, k, c)
	f := floorOf(header, when)
	if f <= 0 {
		if header != "" {
			why += fmt.Sprintf(" (retry-after %q asks for nothing)", header)
		}
		return 0, c, why
	}
	return f, max(c, addSat(f, st.base)), fmt.Sprintf("the longer of %s and the retry-after floor %v (from %q, at most MaxHold = %v) plus up to BaseBackoff = %v",
		why, f, header, maxHold, st.base)
}

// attemptTime is how long the model's attempt lasts: a hanging answer
// until AttemptTimeout, a delayed one its delay.
func (st settings) attemptTime(r reply) time.Duration {
	if r.hang {
		return st.attemptTimeout
	}
	return r.delay
}

// expectation is what the model says one Create does with a script.
type expectation struct {
	attempts int
	last     reply
	gaveUp   bool
}

func (st settings) expect(script []reply) expectation {
	for i := 0; ; i++ {
		r := script[min(i, len(script)-1)]
		if !mayPass(r) {
			return expectation{i + 1, r, false}
		}
		if i+1 >= st.maxAttempts {
			return expectation{i + 1, r, true}
		}
	}
}

func describe(r reply) string {
	switch {
	case r.hang:
		return "no answer (the attempt times out)"
	case r.netErr != nil:
		return fmt.Sprintf("a connection error (%v)", r.netErr)
	case r.status == 0 || r.status == http.StatusOK:
		return "200"
	}
	s := fmt.Sprintf("%d %s", r.status, r.errType)
	if r.errCode != "" {
		s += " (" + r.errCode + ")"
	}
	if r.retryAfter != "" {
		s += " with retry-after: " + r.retryAfter
	}
	if r.retryAt != nil {
		s += " with retry-after as an HTTP date"
	}
	return s
}

// judgeCreate compares one Create (started at start, returned after took
// with msg and err) with the model, given the attempts the API saw.
func judgeCreate(st settings, script []reply, calls []call, msg *provider.Message, err error, took time.Duration) string {
	exp := st.expect(script)
	var hist strings.Builder
	for i, c := range calls {
		fmt.Fprintf(&hist, "\n  attempt %d at t=%v: %s", i+1, c.at, describe(script[min(i, len(script)-1)]))
		if c.answer != "" && script[min(i, len(script)-1)].retryAt != nil {
			fmt.Fprintf(&hist, " (%s)", c.answer)
		}
	}
	ctxt := fmt.Sprintf("\nsettings (defaults filled in): MaxAttempts %d, BaseBackoff %v, MaxBackoff %v, AttemptTimeout %v\nattempts:%s",
		st.maxAttempts, st.base, st.max, st.attemptTimeout, hist.String())
	if len(calls) != exp.attempts {
		why := "is not worth retrying: return it at once"
		switch {
		case exp.gaveUp:
			why = fmt.Sprintf("is worth retrying, but it was attempt MaxAttempts = %d", st.maxAttempts)
		case mayPass(exp.last):
			why = "is worth retrying"
		}
		return fmt.Sprintf("Create made %d attempts; want %d: the answer to attempt %d, %s, %s\n"+
			"retry 408, 429 (not the spend limit), 529, every 5xx, timeouts and connection errors, up to MaxAttempts; never another 4xx%s",
			len(calls), exp.attempts, exp.attempts, describe(exp.last), why, ctxt)
	}
	if calls[0].at != 0 {
		return fmt.Sprintf("the first attempt went out at t=%v; want at once (no limits are set)%s", calls[0].at, ctxt)
	}
	// Full jitter is uniform in [0, ceiling]: a wait under a hundredth of
	// its ceiling has a chance of 1/100, so jittered waits that are all
	// that short, four or more of them, mean the client waits far less than
	// the backoff it was set (or defaulted) to, such as no wait at all.
	jittered, short := 0, 0
	for i := 0; i+1 < len(calls); i++ {
		r := script[min(i, len(script)-1)]
		lo, hi, why := st.waitRange(i, calls[i].answer, calls[i].when)
		spent := st.attemptTime(r)
		wait := calls[i+1].at - calls[i].at - spent
		if wait < lo-early || wait > hi+late {
			return fmt.Sprintf("after attempt %d (%s) the client waited %v before retrying; want %v to %v: %s%s",
				i+1, describe(r), wait, lo, hi, why, ctxt)
		}
		if lo == 0 && hi >= time.Millisecond {
			jittered++
			if wait < hi/100 {
				short++
			}
		}
	}
	if jittered >= 4 && short == jittered {
		return fmt.Sprintf("all %d full-jitter waits were under a hundredth of their ceilings, min(MaxBackoff, BaseBackoff×2^k); "+
			"want each drawn uniformly in [0, ceiling] (a correct client does this with a chance of 1/100 per wait), "+
			"with zero or negative BaseBackoff and MaxBackoff meaning %v and %v\nwaits: %v%s",
			jittered, defaultBaseBackoff, defaultMaxBackoff, gaps(calls), ctxt)
	}
	if want := calls[len(calls)-1].at + st.attemptTime(exp.last); took < want-early || took > want+late {
		return fmt.Sprintf("Create returned at t=%v; want t=%v, when the last attempt's answer came: no wait after the last attempt%s", took, want, ctxt)
	}
	var apiErr *provider.APIError
	switch {
	case !exp.gaveUp && !mayPass(exp.last) && (exp.last.status == 0 || exp.last.status == http.StatusOK):
		if err != nil || msg == nil {
			return fmt.Sprintf("Create = (%v, %v); want the message of the 200%s", msg, err, ctxt)
		}
	case msg != nil || err == nil:
		return fmt.Sprintf("Create = (%v, %v); want an error%s", msg, err, ctxt)
	case exp.last.status != 0:
		if !errors.As(err, &apiErr) || apiErr.StatusCode != exp.last.status || apiErr.Type != exp.last.errType {
			return fmt.Sprintf("Create error = %v; want it to wrap the last answer's *provider.APIError, %d %s (errors.As)%s", err, exp.last.status, exp.last.errType, ctxt)
		}
		if exp.last.errCode == provider.ErrorCodeSpendLimit && !apiErr.SpendLimit() {
			return fmt.Sprintf("Create error's APIError has ErrorCode %q; want %q%s", apiErr.ErrorCode, provider.ErrorCodeSpendLimit, ctxt)
		}
	}
	return ""
}

// --- Drawing answers ---

// drawRetryAfter draws a retry-after in the forms APIError.RetryAfter
// reads: whole and fractional seconds, HTTP dates (in all three forms of
// RFC 9110, suitekit.FormatHTTPDate), and values that ask
// for nothing; long ones only when long is true.
func drawRetryAfter(rt *rapid.T, label string, long bool) (string, func(time.Time) string) {
	top := 30.0
	if long {
		top = 300
	}
	switch rapid.IntRange(0, 6).Draw(rt, label+" form") {
	case 0, 1:
		return "", nil
	case 2, 3:
		return strconv.Itoa(rapid.IntRange(0, int(top)).Draw(rt, label+" seconds")), nil
	case 4:
		return strconv.FormatFloat(rapid.Float64Range(0, top).Draw(rt, label+" fraction"), 'f', rapid.IntRange(1, 3).Draw(rt, label+" decimals"), 64), nil
	case 5:
		ahead := int64(rapid.IntRange(-100, int(top)).Draw(rt, label+" date ahead"))
		form := suitekit.HTTPDateForms().Draw(rt, label+" date form")
		return "", func(now time.Time) string {
			d, _ := suitekit.FormatHTTPDate(time.Unix(now.Unix()+ahead, 0), now, form)
			return d
		}
	}
	return rapid.SampledFrom([]string{"soon", "-3", "0", "never", "1 2"}).Draw(rt, label+" garbage"), nil
}

// dateAhead returns, as an HTTP date, the whole second secs seconds after
// now's (secs may be more seconds than a Duration holds).
func dateAhead(now time.Time, secs int64) string {
	return time.Unix(now.Unix()+secs, 0).UTC().Format(http.TimeFormat)
}

// drawAnswer draws the answer to an attempt: rate limits, overload, other
// 5xx and 408 (worth retrying, with or without retry-after), timeouts and
// connection errors, the spend limit and other 4xx (not worth it), 200.
func drawAnswer(rt *rapid.T, label string, long bool) reply {
	var r reply
	switch k := rapid.IntRange(0, 13).Draw(rt, label); {
	case k <= 2:
		r = reply{status: 429, errType: provider.ErrorRateLimit}
	case k <= 4:
		r = reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded}
	case k == 5:
		code := rapid.OneOf(rapid.SampledFrom([]int{500, 502, 503, 504, 501, 505, 507}), rapid.IntRange(500, 599)).Draw(rt, label+" 5xx")
		r = reply{status: code, errType: provider.ErrorAPI}
		if code == provider.StatusOverloaded {
			r.errType = provider.ErrorOverloaded
		}
	case k == 6:
		r = reply{status: http.StatusRequestTimeout, errType: "timeout_error"}
	case k == 7:
		return reply{hang: true}
	case k == 8:
		return reply{netErr: errors.New("read tcp 127.0.0.1:51234->127.0.0.1:8080: read: connection reset by peer (scripted)")}
	case k == 9:
		r = reply{status: 429, errType: provider.ErrorRateLimit, errCode: provider.ErrorCodeSpendLimit}
	case k == 10:
		code := rapid.OneOf(rapid.SampledFrom([]int{400, 401, 403, 404, 413, 422}), rapid.IntRange(400, 499).Filter(func(c int) bool { return c != 408 && c != 429 })).Draw(rt, label+" 4xx")
		r = reply{status: code, errType: provider.ErrorInvalidRequest}
	default:
		return reply{}
	}
	r.retryAfter, r.retryAt = drawRetryAfter(rt, label+" retry-after", long)
	return r
}

// drawSettings draws a client's retry settings: zero or negative fields
// (the defaults) sometimes, and backoffs of every scale.
func drawSettings(rt *rapid.T, o *Options) {
	o.MaxAttempts = rapid.OneOf(rapid.IntRange(1, 7), rapid.SampledFrom([]int{0, -2})).Draw(rt, "MaxAttempts")
	o.BaseBackoff = time.Duration(rapid.OneOf(rapid.Int64Range(1, int64(2*time.Second)), rapid.SampledFrom([]int64{0, -1})).Draw(rt, "BaseBackoff"))
	o.MaxBackoff = time.Duration(rapid.OneOf(rapid.Int64Range(int64(time.Millisecond), int64(time.Minute)), rapid.SampledFrom([]int64{0, -1})).Draw(rt, "MaxBackoff"))
	o.AttemptTimeout = time.Duration(rapid.OneOf(rapid.Int64Range(int64(time.Millisecond), int64(time.Minute)), rapid.SampledFrom([]int64{0, -1})).Draw(rt, "AttemptTimeout"))
}

// runScript makes one Create against a scripted API answering script
// (the last answer repeating), with o, and judges it; it then lets an
// hour of fake time pass to see that nothing keeps retrying.
func (s *suite) runScript(script []reply, o Options) string {
	a := newAPI(func(n int, _ provider.MessageParams) reply { return script[min(n, len(script)-1)] })
	o.BaseURL, o.APIKey, o.HTTPClient = testURL, testKey, &http.Client{Transport: a}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 100
	}
	var c Client
	if r := suitekit.Report("NewPoliteClient(opts)", func() { c = s.newClient(o) }); r != "" {
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
	defer cancel()
	var (
		msg *provider.Message
		err error
	)
	if r := suitekit.Report("Create(ctx, params)", func() { msg, err = c.Create(ctx, prompt(1, 20)) }); r != "" {
		return r
	}
	took := time.Since(a.start)
	calls := a.snapshot()
	if msg := judgeCreate(settingsOf(o), script, calls, msg, err, took); msg != "" {
		return msg
	}
	time.Sleep(time.Hour)
	if n := len(a.snapshot()); n != len(calls) {
		return fmt.Sprintf("after Create returned, %d more attempts were made in the next hour; want none: nothing keeps retrying in the background", n-len(calls))
	}
	return ""
}

// --- The checks ---

// retriesWhatMayPass runs Create against random scripts of answers with
// random retry settings, and compares every attempt, wait and result with
// the model: what is retried, what comes back at once, MaxAttempts, the
// defaults, backoffs and retry-after floors.
func (s *suite) retriesWhatMayPass(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		var o Options
		drawSettings(rt, &o)
		st := settingsOf(o)
		script := make([]reply, rapid.IntRange(1, st.maxAttempts+1).Draw(rt, "answers"))
		for i := range script {
			script[i] = drawAnswer(rt, fmt.Sprintf("answer %d", i), false)
		}
		return s.runScript(script, o)
	})
}

// givesUpRandom runs Create against scripts of failures that are all
// worth retrying, with random MaxAttempts (zero or less meaning 6): it
// must make exactly that many attempts and return the last one's error.
func (s *suite) givesUpRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		var o Options
		drawSettings(rt, &o)
		st := settingsOf(o)
		script := make([]reply, st.maxAttempts)
		for i := range script {
			for script[i] = drawAnswer(rt, fmt.Sprintf("answer %d", i), false); !mayPass(script[i]); {
				script[i] = drawAnswer(rt, fmt.Sprintf("answer %d again", i), false)
			}
		}
		return s.runScript(script, o)
	})
}

// retryAfterRegimes makes the readings of "retry-after is a floor" give
// different answers. With a backoff that has grown far past the
// retry-after and its extra (8 times), a floor leaves the backoff: of 12
// retries, at least one must wait longer than retry-after plus
// BaseBackoff (a correct client fails this with a chance of 8^-12), which
// a client that replaces the backoff never does. With a backoff shorter
// than the retry-after, every wait is the retry-after plus at most
// BaseBackoff, which a client that adds the two overshoots.
func (s *suite) retryAfterRegimes(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		const m = 12
		longer := rapid.Bool().Draw(rt, "backoff longer than retry-after")
		var o Options
		var ra time.Duration
		var plain int // failures without retry-after first, to grow the backoff
		if longer {
			o.BaseBackoff = time.Duration(rapid.Int64Range(int64(100*time.Millisecond), int64(3*time.Second)).Draw(rt, "BaseBackoff"))
			ra = time.Duration(rapid.IntRange(1, 5).Draw(rt, "retry-after seconds")) * time.Second
			need := 8 * (ra + o.BaseBackoff)
			for o.BaseBackoff<<plain < need {
				plain++
			}
			o.MaxBackoff = need + time.Duration(rapid.Int64Range(0, int64(3*need)).Draw(rt, "MaxBackoff beyond"))
		} else {
			ra = time.Duration(rapid.IntRange(2, 30).Draw(rt, "retry-after seconds")) * time.Second
			o.BaseBackoff = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(ra/4)).Draw(rt, "BaseBackoff"))
			o.MaxBackoff = time.Duration(rapid.Int64Range(int64(o.BaseBackoff), int64(ra/2)).Draw(rt, "MaxBackoff"))
			plain = rapid.IntRange(0, 3).Draw(rt, "plain failures first")
		}
		o.MaxAttempts = plain + m + 1
		date := rapid.Bool().Draw(rt, "as an HTTP date")
		script := make([]reply, 0, o.MaxAttempts)
		for range plain {
			script = append(script, reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded})
		}
		for range m {
			r := reply{status: rapid.SampledFrom([]int{429, provider.StatusOverloaded}).Draw(rt, "status"), errType: provider.ErrorRateLimit}
			if r.status == provider.StatusOverloaded {
				r.errType = provider.ErrorOverloaded
			}
			if date {
				secs := int64(ra / time.Second)
				r.retryAt = func(now time.Time) string { return dateAhead(now, secs) }
			} else {
				r.retryAfter = strconv.Itoa(int(ra / time.Second))
			}
			script = append(script, r)
		}
		script = append(script, reply{})
		a := newAPI(func(n int, _ provider.MessageParams) reply { return script[min(n, len(script)-1)] })
		o.BaseURL, o.APIKey, o.HTTPClient, o.MaxInFlight = testURL, testKey, &http.Client{Transport: a}, 10
		var c Client
		if r := suitekit.Report("NewPoliteClient(opts)", func() { c = s.newClient(o) }); r != "" {
			return r
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
		defer cancel()
		var (
			msg *provider.Message
			err error
		)
		if r := suitekit.Report("Create(ctx, params)", func() { msg, err = c.Create(ctx, prompt(1, 20)) }); r != "" {
			return r
		}
		calls := a.snapshot()
		st := settingsOf(o)
		if failure := judgeCreate(st, script, calls, msg, err, time.Since(a.start)); failure != "" {
			return failure
		}
		if !longer {
			return ""
		}
		beyond := 0
		for i := plain; i < plain+m; i++ {
			f := floorOf(calls[i].answer, calls[i].when)
			if calls[i+1].at-calls[i].at > f+o.BaseBackoff {
				beyond++
			}
		}
		if beyond == 0 {
			return fmt.Sprintf("after %d answers with retry-after %v, when the backoff's ceiling had grown to 8 times retry-after plus BaseBackoff (%v) or more, "+
				"every wait was within retry-after plus BaseBackoff; want the longer of the backoff and retry-after plus its extra: "+
				"retry-after is a floor under the backoff, not a replacement for it (a correct client fails this with a chance of 8^-12)\nwaits: %v",
				m, ra, 8*(ra+o.BaseBackoff), gaps(calls)[plain:])
		}
		return ""
	})
}

// retryAfterIsCappedFixed: 999999 seconds (11.6 days) and 1e30 (past the
// largest Duration) each count as MaxHold.
func (s *suite) retryAfterIsCappedFixed(t *testing.T) {
	for _, ra := range []string{"999999", "1e30"} {
		if msg := s.cappedOnce([]string{ra}, 100*time.Millisecond, time.Second); msg != "" {
			t.Fatal(msg)
		}
	}
}

// retryAfterIsCapped sends retry-after values past MaxHold, however large
// (hours, huge numbers of digits, 1e30, dates centuries ahead): each must
// count as MaxHold, and the sum with its extra must not overflow.
func (s *suite) retryAfterIsCapped(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		n := rapid.IntRange(1, 3).Draw(rt, "answers with retry-after")
		var ras []string
		for range n {
			var v string
			switch rapid.IntRange(0, 3).Draw(rt, "form") {
			case 0:
				v = strconv.FormatInt(rapid.Int64Range(61, math.MaxInt64).Draw(rt, "seconds"), 10)
			case 1:
				v = strconv.Itoa(rapid.IntRange(1, 9).Draw(rt, "first digit")) + strings.Repeat("0", rapid.IntRange(2, 40).Draw(rt, "zeros"))
			case 2:
				v = strconv.FormatFloat(math.Pow(10, rapid.Float64Range(1.8, 300).Draw(rt, "log10 seconds")), 'g', -1, 64)
			default:
				v = "date " + strconv.FormatInt(rapid.Int64Range(61, 300*365*24*3600).Draw(rt, "date ahead"), 10)
			}
			ras = append(ras, v)
		}
		base := time.Duration(rapid.Int64Range(1, int64(5*time.Second)).Draw(rt, "BaseBackoff"))
		maxB := time.Duration(rapid.Int64Range(int64(base), int64(30*time.Second)).Draw(rt, "MaxBackoff"))
		return s.cappedOnce(ras, base, maxB)
	})
}

// cappedOnce runs one Create against answers with the retry-after values
// ras (a value "date N" is an HTTP date N seconds ahead), then 200.
func (s *suite) cappedOnce(ras []string, base, maxB time.Duration) string {
	script := make([]reply, 0, len(ras)+1)
	for i, v := range ras {
		r := reply{status: 429, errType: provider.ErrorRateLimit, retryAfter: v}
		if i%2 == 1 {
			r = reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded, retryAfter: v}
		}
		if secs, ok := strings.CutPrefix(v, "date "); ok {
			n, _ := strconv.ParseInt(secs, 10, 64)
			r.retryAfter, r.retryAt = "", func(now time.Time) string { return dateAhead(now, n) }
		}
		script = append(script, r)
	}
	script = append(script, reply{})
	o := Options{MaxAttempts: len(script), BaseBackoff: base, MaxBackoff: maxB}
	failure := s.runScript(script, o)
	if failure != "" {
		failure += fmt.Sprintf("\na retry-after longer than MaxHold = %v counts as MaxHold, however large the number or far the date: "+
			"a server that asks for days has made a mistake; cap it before you add the extra, so the sum cannot overflow", maxHold)
	}
	return failure
}

// hugeBackoffSaturates gives the backoff settings near the largest
// Duration: the doubling, the draw and the sum with retry-after must
// saturate instead of overflowing (or panicking in rand.Int64N). The
// waits are far longer than a bubble's clock can run, so ctx ends first:
// the call must then still be waiting after its first attempt, or have
// retried no sooner than its floor.
func (s *suite) hugeBackoffSaturates(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		big := func(label string) time.Duration {
			return time.Duration(rapid.OneOf(rapid.Int64Range(math.MaxInt64/16, math.MaxInt64), rapid.Just(int64(math.MaxInt64))).Draw(rt, label))
		}
		o := Options{MaxAttempts: 2, BaseBackoff: big("BaseBackoff"), MaxBackoff: big("MaxBackoff")}
		r := reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded}
		r.retryAfter = rapid.SampledFrom([]string{"", "1", "30", "999999", "1e30"}).Draw(rt, "retry-after")
		a := newAPI(func(n int, _ provider.MessageParams) reply {
			if n == 0 {
				return r
			}
			return reply{}
		})
		o.BaseURL, o.APIKey, o.HTTPClient, o.MaxInFlight = testURL, testKey, &http.Client{Transport: a}, 10
		var c Client
		if msg := suitekit.Report("NewPoliteClient(opts)", func() { c = s.newClient(o) }); msg != "" {
			return msg
		}
		end := time.Duration(rapid.Int64Range(int64(time.Second), int64(10*365*24*time.Hour)).Draw(rt, "ctx ends after"))
		ctx, cancel := context.WithTimeout(context.Background(), end)
		defer cancel()
		var (
			msg *provider.Message
			err error
		)
		if report := suitekit.Report(fmt.Sprintf("Create(ctx, params) with BaseBackoff %v and MaxBackoff %v", o.BaseBackoff, o.MaxBackoff),
			func() { msg, err = c.Create(ctx, prompt(1, 20)) }); report != "" {
			return report
		}
		calls := a.snapshot()
		setting := fmt.Sprintf("BaseBackoff %v, MaxBackoff %v, a 529 with retry-after %q, then 200, and a ctx that ends after %v", o.BaseBackoff, o.MaxBackoff, r.retryAfter, end)
		switch len(calls) {
		case 1:
			if msg != nil || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Sprintf("%s: Create = (%v, %v) after 1 attempt; want an error wrapping context.DeadlineExceeded", setting, msg, err)
			}
		case 2:
			if f := floorOf(calls[0].answer, calls[0].when); calls[1].at < f {
				return fmt.Sprintf("%s: the retry came after %v; want at least the retry-after floor %v: "+
					"the backoff and the sum with retry-after must saturate at the largest Duration, not overflow into a short wait", setting, calls[1].at, f)
			}
		default:
			return fmt.Sprintf("%s: Create made %d attempts; want 1 or 2", setting, len(calls))
		}
		return ""
	})
}
