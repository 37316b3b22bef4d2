package retrysuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// --- Options and scripts drawn at random ---

// drawOptions draws the settings of a call: sometimes zero or negative
// fields, which mean the defaults, and every scale of base and cap.
func drawOptions(rt *rapid.T) Options {
	o := Options{
		MaxTries: rapid.OneOf(rapid.IntRange(1, 8), rapid.SampledFrom([]int{0, -1, math.MinInt})).Draw(rt, "MaxTries"),
		Base: time.Duration(rapid.OneOf(
			rapid.Int64Range(1, int64(2*time.Second)),
			rapid.SampledFrom([]int64{0, -int64(time.Second)}),
		).Draw(rt, "Base")),
		// Caps stay below a few days: a bubble's fake clock ends in 2262,
		// and the retryAfterCapped checks take larger ones.
		Cap: time.Duration(rapid.OneOf(
			rapid.Int64Range(int64(time.Millisecond), int64(30*time.Second)),
			rapid.Int64Range(int64(30*time.Second), int64(100*time.Hour)),
			rapid.SampledFrom([]int64{0, -5}),
		).Draw(rt, "Cap")),
		Jitter:          rapid.Bool().Draw(rt, "Jitter"),
		HonorRetryAfter: rapid.Bool().Draw(rt, "HonorRetryAfter"),
	}
	return o
}

// drawBody gives r a body of a random size: the short status text mostly,
// up to 200 KiB, and for a reply that will be discarded, sometimes one
// that fails halfway or never ends.
func drawBody(rt *rapid.T, label string, r *reply, discarded bool) {
	r.bodySize = rapid.OneOf(rapid.Just(0), rapid.IntRange(1, maxDrain), rapid.IntRange(maxDrain+1, 200<<10)).Draw(rt, label+" body")
	if discarded {
		switch rapid.IntRange(0, 9).Draw(rt, label+" body kind") {
		case 0:
			r.endless = true
		case 1:
			r.bodyFails = r.bodySize > 0
		}
	}
}

// drawReply draws the answer to attempt i: mostly failures worth
// retrying (statuses, errors, hangs when the client has a Timeout),
// sometimes a status or error that is not, or a success.
func drawReply(rt *rapid.T, i int, cap time.Duration, hangs bool) reply {
	label := fmt.Sprintf("reply %d", i)
	var r reply
	switch k := rapid.IntRange(0, 12).Draw(rt, label); {
	case k <= 4:
		r.status = rapid.SampledFrom(retryableStatuses).Draw(rt, label+" status")
		r.retryAfter, r.retryAt = drawRetryAfter(rt, label+" Retry-After", cap)
		drawBody(rt, label, &r, true)
	case k <= 7:
		errs := retryableErrors()
		j := rapid.IntRange(0, len(errs)).Draw(rt, label+" error")
		if j == len(errs) && hangs {
			r.hang = true
		} else {
			r.err = errs[min(j, len(errs)-1)]
		}
	case k <= 9:
		r.status = drawFinalStatus(rt, label+" status")
		r.retryAfter, r.retryAt = drawRetryAfter(rt, label+" Retry-After", cap)
		drawBody(rt, label, &r, false)
	case k == 10:
		errs := finalErrors()
		r.err = errs[rapid.IntRange(0, len(errs)-1).Draw(rt, label+" error")]
	default:
		r.status = http.StatusOK
		drawBody(rt, label, &r, false)
	}
	return r
}

// drawScript draws the answers to up to MaxTries+1 attempts (the last one
// repeats for ever).
func drawScript(rt *rapid.T, st settings, hangs bool) []reply {
	n := rapid.IntRange(1, st.maxTries+1).Draw(rt, "replies")
	script := make([]reply, n)
	for i := range script {
		script[i] = drawReply(rt, i, st.cap, hangs)
	}
	return script
}

// runScript makes one call with opts against a server answering script,
// with the client's Timeout, and judges it against the model.
func (s *suite) runScript(script []reply, opts Options, timeout time.Duration, onAttempt bool) string {
	srv := newServer(script...)
	c := srv.client()
	c.Timeout = timeout
	if onAttempt {
		opts.OnAttempt = srv.onAttempt
	}
	st := settingsOf(opts, timeout)
	start := time.Now()
	out, failure := s.callWith(context.Background(), c, newRequest(), opts)
	if failure != "" {
		return failure
	}
	return s.judge(out, srv, script, st, start, onAttempt)
}

func newRequest() *http.Request {
	req, err := http.NewRequest(http.MethodGet, testURL, nil)
	if err != nil {
		panic(err) // a constant URL
	}
	return req
}

// --- The checks ---

// followsTheModel runs calls against random scripts of answers (statuses
// worth retrying and not, transport errors of both kinds, hangs ended by
// the client's Timeout, Retry-After in every form, bodies of every size)
// with random options (zero ones meaning the defaults), and compares every
// attempt, wait, body and error with the model of CallWithRetries.
func (s *suite) followsTheModel(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		opts := drawOptions(rt)
		var timeout time.Duration
		if rapid.Bool().Draw(rt, "client Timeout") {
			timeout = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(10*time.Second)).Draw(rt, "Timeout"))
		}
		st := settingsOf(opts, timeout)
		script := drawScript(rt, st, timeout > 0)
		return s.runScript(script, opts, timeout, rapid.Bool().Draw(rt, "OnAttempt"))
	})
}

// neverRetriesRandom: after 0 to 3 failures worth retrying, a status
// drawn from every one not worth it (2xx, 4xx, 5xx but the six), with
// and without Retry-After, comes back at once, as it is.
func (s *suite) neverRetriesRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		failures := rapid.IntRange(0, 3).Draw(rt, "failures first")
		opts := Options{MaxTries: failures + 2 + rapid.IntRange(0, 3).Draw(rt, "spare tries"), Base: time.Millisecond, Cap: time.Second,
			Jitter: rapid.Bool().Draw(rt, "Jitter"), HonorRetryAfter: rapid.Bool().Draw(rt, "HonorRetryAfter")}
		script := allFail(rt, failures, false, opts.Cap)
		var last reply
		last.status = rapid.OneOf(
			rapid.IntRange(500, 599).Filter(func(c int) bool { return !mayPass(status(c)) }),
			rapid.IntRange(400, 499).Filter(func(c int) bool { return !mayPass(status(c)) }),
			rapid.IntRange(200, 299),
		).Draw(rt, "status not worth retrying")
		last.retryAfter, last.retryAt = drawRetryAfter(rt, "its Retry-After", opts.Cap)
		drawBody(rt, "its", &last, false)
		return s.runScript(append(script, last, status(http.StatusOK)), opts, 0, false)
	})
}

// retriesErrorsRandom: 1 to 5 transport errors worth retrying, of every
// kind (timeouts, read deadlines, refused and reset connections, early
// EOFs), then 200.
func (s *suite) retriesErrorsRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		n := rapid.IntRange(1, 5).Draw(rt, "errors")
		script := make([]reply, 0, n+1)
		for range n {
			errs := retryableErrors()
			script = append(script, reply{err: errs[rapid.IntRange(0, len(errs)-1).Draw(rt, "error kind")]})
		}
		opts := Options{MaxTries: n + 1, Base: time.Millisecond, Cap: time.Second, Jitter: rapid.Bool().Draw(rt, "Jitter")}
		return s.runScript(append(script, status(http.StatusOK)), opts, 0, false)
	})
}

// allFail draws a script whose every answer is worth retrying: statuses
// (without Retry-After unless ra) and transport errors.
func allFail(rt *rapid.T, n int, ra bool, cap time.Duration) []reply {
	script := make([]reply, n)
	for i := range script {
		label := fmt.Sprintf("reply %d", i)
		if rapid.IntRange(0, 2).Draw(rt, label) == 0 {
			errs := retryableErrors()
			script[i].err = errs[rapid.IntRange(0, len(errs)-1).Draw(rt, label+" error")]
			continue
		}
		script[i].status = rapid.SampledFrom(retryableStatuses).Draw(rt, label+" status")
		if ra {
			script[i].retryAfter, script[i].retryAt = drawRetryAfter(rt, label+" Retry-After", cap)
		}
	}
	return script
}

// backoffBetweenAttempts checks the waits between attempts against
// BackoffDelay(0), (1), … for random bases, caps and numbers of tries,
// with and without jitter, with a few fixed steps first.
func (s *suite) backoffBetweenAttempts(t *testing.T) {
	srv := newServer(status(503))
	out := s.call(t, srv, Options{MaxTries: 8, Base: 100 * time.Millisecond, Cap: time.Second})
	s.wantGaveUp(t, out, srv, "every attempt got 503 and MaxTries is 8")
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if got := srv.gaps(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("without jitter, the waits between 8 attempts were %v; want %v\n(before retry n+1 wait BackoffDelay(n, Base=100ms, Cap=1s, false), n from 0)", got, want)
	}

	// With jitter the waits are not all their ceilings.
	atCeiling, total := 0, 0
	for range 30 {
		srv := newServer(status(503))
		out := s.call(t, srv, Options{MaxTries: 6, Base: 100 * time.Millisecond, Cap: time.Second, Jitter: true})
		s.wantGaveUp(t, out, srv, "every attempt got 503 and MaxTries is 6")
		for n, gap := range srv.gaps() {
			total++
			if gap == min(time.Second, 100*time.Millisecond<<n) {
				atCeiling++
			}
		}
	}
	if atCeiling > total/2 {
		t.Errorf("with Jitter, %d of %d waits were exactly their ceiling; want a random wait below it (pass Jitter on to BackoffDelay)", atCeiling, total)
	}
}

// backoffBetweenAttemptsRandom checks the waits of random scripts of
// failures without Retry-After against the model, for random options.
func (s *suite) backoffBetweenAttemptsRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		opts := drawOptions(rt)
		opts.HonorRetryAfter = false
		st := settingsOf(opts, 0)
		return s.runScript(allFail(rt, st.maxTries, false, st.cap), opts, 0, false)
	})
}

// stopsAfterMaxTries checks that random numbers of tries (zero or less
// meaning 12) against a server that always fails make exactly that many
// attempts, then give up with the last failure, without a last wait.
func (s *suite) stopsAfterMaxTries(t *testing.T) {
	srv := newServer(status(503))
	out := s.call(t, srv, Options{MaxTries: 1, Base: 100 * time.Millisecond, Cap: time.Second})
	wantAttempts(t, srv, 1, "MaxTries 1 means the first attempt and no retry")
	s.wantGaveUp(t, out, srv, "MaxTries 1 and the attempt got 503")
	if out.took != 0 {
		t.Errorf("CallWithRetries with MaxTries 1 took %v; want 0s (nothing to wait for)", out.took)
	}
}

// stopsAfterMaxTriesRandom makes random numbers of tries against random
// scripts of failures.
func (s *suite) stopsAfterMaxTriesRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		opts := drawOptions(rt)
		opts.MaxTries = rapid.OneOf(rapid.IntRange(1, 20), rapid.SampledFrom([]int{0, -3})).Draw(rt, "MaxTries")
		st := settingsOf(opts, 0)
		return s.runScript(allFail(rt, st.maxTries, true, st.cap), opts, 0, false)
	})
}

// retryAfterRegimes makes the two readings of "a floor on the wait" give
// different answers: a backoff longer than the Retry-After and its extra
// (the wait must be the backoff itself, neither the header's time nor the
// sum of both) and one shorter than the Retry-After (the wait must be the
// header's time plus its extra). The header is in seconds, or an HTTP
// date when date is true, and arrives after 0 to 3 plain failures, so the
// backoff it meets is any of the first four.
func (s *suite) retryAfterRegimes(t *testing.T, date bool) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		secs := rapid.Int64Range(1, 600).Draw(rt, "Retry-After seconds")
		before := rapid.IntRange(0, 3).Draw(rt, "failures before it")
		longer := rapid.Bool().Draw(rt, "backoff longer than Retry-After")
		// The floor is secs (in seconds form) or in (secs−1, secs] (a date).
		hiFloor := time.Duration(secs) * time.Second
		loFloor := hiFloor
		if date {
			loFloor -= time.Second
		}
		top := hiFloor + max(hiFloor/5, time.Second)
		var ceiling time.Duration
		if longer {
			ceiling = top + time.Duration(rapid.Int64Range(1, int64(10*top)).Draw(rt, "backoff beyond"))
		} else {
			if loFloor < 2 {
				loFloor = hiFloor // the date form of 1 s: use the seconds' floor as the bound
			}
			ceiling = time.Duration(rapid.Int64Range(1, max(int64(loFloor)-1, 1)).Draw(rt, "backoff below"))
		}
		// Round base up when the backoff must stay longer, down when shorter.
		base := max(ceiling>>before, 1)
		if longer {
			base = (ceiling + 1<<before - 1) >> before
		}
		opts := Options{MaxTries: before + 2, Base: base, Cap: lab.InfDuration, HonorRetryAfter: true}
		script := make([]reply, before+2)
		for i := range before {
			script[i] = status(rapid.SampledFrom(retryableStatuses).Draw(rt, "plain failure"))
		}
		r := reply{status: rapid.SampledFrom(retryableStatuses).Draw(rt, "status with Retry-After")}
		if date {
			form := suitekit.HTTPDateForms().Draw(rt, "date form")
			r.retryAt = func(now time.Time) string {
				return dateAhead(now, secs, form)
			}
		} else {
			r.retryAfter = strconv.FormatInt(secs, 10)
		}
		script[before] = r
		script[before+1] = status(http.StatusOK)
		return s.runScript(script, opts, 0, false)
	})
}

// retryAfterSecondsFloor checks Retry-After in seconds as a floor, against
// backoffs longer and shorter than it, and that values asking for nothing
// (0, words, negative numbers) or a client that does not honour it leave
// the plain backoff.
func (s *suite) retryAfterSecondsFloor(t *testing.T) {
	const base = 100 * time.Millisecond
	opts := Options{MaxTries: 3, Base: base, Cap: time.Minute, Jitter: true, HonorRetryAfter: true}
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

// retryAfterDateFloor is retryAfterSecondsFloor for HTTP dates, with a
// date in the past asking for nothing.
func (s *suite) retryAfterDateFloor(t *testing.T) {
	const base = 100 * time.Millisecond
	opts := Options{MaxTries: 3, Base: base, Cap: time.Minute, Jitter: true, HonorRetryAfter: true}
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	srv := newServer(reply{status: 503, retryAfter: past}, status(200))
	gap := s.retryAfterGap(t, srv, opts, "the server answered 503 with Retry-After an hour ago, then 200")
	if gap > base {
		t.Errorf("after 503 with Retry-After: %s (an hour ago) the client waited %v; want at most %v, the plain backoff: a date in the past asks for no wait", past, gap, base)
	}
	// A date 30 s ahead in each form: the floor is in (29 s, 30 s], as
	// the attempt arrives within the second before.
	const ahead = 30
	for _, f := range []suitekit.HTTPDateForm{suitekit.IMFFixdate, suitekit.RFC850Date, suitekit.AsctimeDate} {
		var sent string
		srv := newServer(reply{status: 503, retryAt: func(now time.Time) string {
			sent = dateAhead(now, ahead, f)
			return sent
		}}, status(200))
		gap := s.retryAfterGap(t, srv, opts, fmt.Sprintf("the server answered 503 with Retry-After a date %d s ahead (%v form), then 200", ahead, f))
		lo, hi := (ahead-1)*time.Second, ahead*time.Second+6*time.Second
		if gap <= lo || gap > hi {
			t.Errorf("after 503 with Retry-After: %s (%d s ahead, in the %v form of an HTTP date) the client waited %v; want more than %v and at most %v\n"+
				"RFC 9110 (section 5.6.7) has a recipient accept an HTTP date in any of its three forms: "+
				"IMF-fixdate (Sun, 06 Nov 1994 08:49:37 GMT), RFC 850 (Sunday, 06-Nov-94 08:49:37 GMT) and asctime (Sun Nov  6 08:49:37 1994)",
				sent, ahead, f, gap, lo, hi)
		}
	}
}

// retryAfterJittered checks that clients told a Retry-After come back
// within its extra, each in [floor, floor + max(floor/5, 1s)], and spread
// over it. Twenty-five clients are told the same random value (a number of
// seconds or a date), so an extra that is not random shows as lockstep;
// twenty-five more are each told their own, from 1 to 30 seconds in either
// form. One value a run would often be 5 s or less, where the extra is the
// second and an extra of half the floor, say, looks the same; among
// twenty-five independent values nearly every run has several above it.
func (s *suite) retryAfterJittered(t *testing.T) {
	r := suitekit.Rand(t)
	const same, own = 25, 25
	opts := Options{MaxTries: 3, Base: time.Duration(1 + r.Int64N(int64(100*time.Millisecond))), Cap: time.Hour, Jitter: true, HonorRetryAfter: true}
	// told returns a reply of Retry-After secs seconds, as a number or as
	// a date.
	told := func(secs int64, date bool) reply {
		if !date {
			return reply{status: 503, retryAfter: strconv.FormatInt(secs, 10)}
		}
		return reply{status: 503, retryAt: func(now time.Time) string {
			return now.Truncate(time.Second).Add(time.Duration(secs) * time.Second).UTC().Format(http.TimeFormat)
		}}
	}
	// extra calls once with rep and returns how long beyond its floor the
	// client waited, after checking the wait is within the floor's extra.
	extra := func(rep reply) time.Duration {
		t.Helper()
		srv := newServer(rep, status(200))
		gap := s.retryAfterGap(t, srv, opts, fmt.Sprintf("the server answered %v, then 200", rep))
		floor, _ := floorOf(srv.attempts[0].retryAfter, srv.attempts[0].at, opts.Cap)
		if top := floor + max(floor/5, time.Second); gap < floor || gap > top {
			t.Fatalf("after 503 with Retry-After: %s the client waited %v; want between %v and %v (the floor plus up to a fifth of it or a second, whichever is more)",
				srv.attempts[0].retryAfter, gap, floor, top)
		}
		return gap - floor
	}
	secs, date := 1+r.Int64N(30), r.Int64N(2) == 0
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for range same {
		// Dates make each floor a little different: compare the extras.
		e := extra(told(secs, date))
		lo, hi = min(lo, e), max(hi, e)
	}
	if hi-lo < 50*time.Millisecond {
		t.Errorf("%d calls told the same Retry-After (%d s%s) waited between %v and %v beyond it; want a spread of at least 50ms\n"+
			"add a little random jitter on top of Retry-After, or every client the server told the same thing comes back in lockstep",
			same, secs, map[bool]string{true: ", as a date", false: ""}[date], lo, hi)
	}
	for range own {
		extra(told(1+r.Int64N(30), r.Int64N(2) == 0))
	}
}

// retryAfterCapped checks that a Retry-After beyond Cap counts as Cap,
// however far away: numbers of many digits (past int64), dates centuries
// ahead, and with a Cap near the largest Duration, sums that must
// saturate instead of overflowing.
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

// retryAfterCappedRandom draws Retry-After values beyond random caps:
// numbers of many digits (past int64), dates centuries ahead, and the
// number of seconds that overflows seconds × time.Second by a hair.
// Caps up to ten years are waited out; larger ones, up to the largest
// Duration, where Retry-After plus its extra must saturate instead of
// overflowing, are checked by ending ctx first (a bubble's fake clock ends
// in 2262): the call must still be waiting, after its first attempt.
func (s *suite) retryAfterCappedRandom(t *testing.T) {
	const tenYears = 10 * 365 * 24 * time.Hour
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		huge := rapid.Bool().Draw(rt, "cap past ten years")
		var cap time.Duration
		if huge {
			cap = time.Duration(rapid.OneOf(
				rapid.Int64Range(int64(tenYears), math.MaxInt64),
				rapid.Just(int64(lab.InfDuration)),
			).Draw(rt, "Cap"))
		} else {
			cap = time.Duration(rapid.OneOf(
				rapid.Int64Range(int64(time.Second), int64(time.Hour)),
				rapid.Int64Range(int64(time.Hour), int64(tenYears)),
			).Draw(rt, "Cap"))
		}
		capSecs := int64(cap / time.Second)
		var r reply
		r.status = rapid.SampledFrom(retryableStatuses).Draw(rt, "status")
		const maxAhead = 300 * 365 * 24 * 3600
		switch rapid.IntRange(0, 2).Draw(rt, "form") {
		case 0: // whole seconds beyond the cap, up to 40 digits
			n := rapid.OneOf(
				rapid.Int64Range(capSecs+1, math.MaxInt64),
				rapid.Just(int64(math.MaxInt64)),
			).Draw(rt, "seconds")
			r.retryAfter = strconv.FormatInt(n, 10) + rapid.SampledFrom([]string{"", "0", "000", "0000000000", "99999999999999999999"}).Draw(rt, "more digits")
		case 1: // a date beyond the cap, up to 300 years ahead
			ahead := rapid.Int64Range(min(capSecs+2, maxAhead), maxAhead).Draw(rt, "date ahead")
			form := suitekit.HTTPDateForms().Draw(rt, "date form")
			r.retryAt = func(now time.Time) string {
				return dateAhead(now, ahead, form)
			}
		default: // seconds that overflow seconds × time.Second by a hair
			r.retryAfter = strconv.FormatInt(math.MaxInt64/int64(time.Second)+rapid.Int64Range(1, 1000).Draw(rt, "past"), 10)
		}
		opts := Options{
			MaxTries: 2, Base: time.Duration(rapid.Int64Range(1, int64(min(cap, time.Second))).Draw(rt, "Base")), Cap: cap,
			Jitter: rapid.Bool().Draw(rt, "Jitter"), HonorRetryAfter: true,
		}
		if !huge {
			return s.runScript([]reply{r, status(http.StatusOK)}, opts, 0, false)
		}
		end := time.Duration(rapid.Int64Range(int64(2*time.Second), int64(tenYears)).Draw(rt, "ctx ends after"))
		ctx, cancel := context.WithTimeout(context.Background(), end)
		defer cancel()
		srv := newServer(r, status(http.StatusOK))
		out, failure := s.callWith(ctx, srv.client(), newRequest(), opts)
		if failure != "" {
			return failure
		}
		if out.resp != nil {
			out.resp.Body.Close()
		}
		if srv.count() != 1 || out.resp != nil || !errors.Is(out.err, context.DeadlineExceeded) || out.took != end {
			return fmt.Sprintf("with Cap = %v and %v, then 200, and a ctx that ends after %v: CallWithRetries = (%v, %v) after %v and %d attempts; "+
				"want (nil, an error wrapping context.DeadlineExceeded) at %v, after 1 attempt: the Retry-After counts as the Cap, "+
				"far longer than ctx lasts, so the call is still waiting when ctx ends\n"+
				"the Retry-After plus its extra is larger than the largest Duration here: saturate instead of overflowing into a negative wait\nattempts:%s",
				cap, srv.replies[0], end, respStatus(out.resp), out.err, out.took, srv.count(), end, srv.history())
		}
		return ""
	})
}

// stopsOnContextRandom ends the caller's ctx at a random instant of a
// random script of failures (during a wait, or during an attempt that gets
// no answer): the call must return at that instant, with ctx's error,
// after exactly the attempts sent before it.
func (s *suite) stopsOnContextRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		n := rapid.IntRange(1, 8).Draw(rt, "attempts")
		script := make([]reply, n)
		for i := range script {
			if i == n-1 && rapid.Bool().Draw(rt, "last hangs") {
				script[i] = reply{hang: true}
				continue
			}
			script[i] = status(rapid.SampledFrom(retryableStatuses).Draw(rt, "status"))
		}
		opts := Options{
			MaxTries: n + 1 + rapid.IntRange(0, 3).Draw(rt, "spare tries"),
			Base:     time.Duration(rapid.Int64Range(int64(time.Microsecond), int64(10*time.Second)).Draw(rt, "Base")),
			Cap:      time.Duration(rapid.Int64Range(int64(time.Microsecond), int64(time.Minute)).Draw(rt, "Cap")),
		}
		st := settingsOf(opts, 0)
		// Attempt i starts at the sum of the first i backoffs; the ctx ends
		// after attempt n−1 is sent and before attempt n would be.
		var sent time.Duration
		for i := range n - 1 {
			sent += ceilingOf(i, st.base, st.cap)
		}
		until := ceilingOf(n-1, st.base, st.cap)
		if script[n-1].hang {
			until = hangLimit / 2
		}
		end := sent + time.Duration(rapid.Int64Range(1, int64(until)-1).Draw(rt, "ctx ends after the last attempt"))
		cancel := rapid.Bool().Draw(rt, "cancel rather than a deadline")
		ctx, stop := context.WithTimeout(context.Background(), end)
		want := context.DeadlineExceeded
		if cancel {
			var c context.CancelFunc
			ctx, c = context.WithCancel(context.Background())
			timer := time.AfterFunc(end, c)
			stop = func() { timer.Stop(); c() }
			want = context.Canceled
		}
		defer stop()
		srv := newServer(script...)
		start := time.Now()
		out, failure := s.callWith(ctx, srv.client(), newRequest(), opts)
		if failure != "" {
			return failure
		}
		how := fmt.Sprintf("ctx ended %v into a call (%v, Base %v, Cap %v, no jitter) whose attempt %d went out at %v", end, map[bool]string{true: "cancelled", false: "deadline"}[cancel], st.base, st.cap, n, sent)
		if script[n-1].hang {
			how += " and got no answer"
		}
		if out.resp != nil {
			out.resp.Body.Close()
			return fmt.Sprintf("CallWithRetries returned a %d response; want (nil, an error wrapping %v)\n%s\nattempts:%s", out.resp.StatusCode, want, how, srv.history())
		}
		if !errors.Is(out.err, want) {
			return fmt.Sprintf("CallWithRetries error = %v; want an error wrapping %v (ctx.Err())\n%s\nattempts:%s", out.err, want, how, srv.history())
		}
		if out.took != end {
			return fmt.Sprintf("CallWithRetries returned %v after it was called; want %v: stop the moment ctx is done, mid-wait or mid-attempt\n%s\nattempts:%s", out.took, end, how, srv.history())
		}
		if got := srv.count(); got != n {
			return fmt.Sprintf("the server saw %d attempts; want %d: no attempt after ctx is done, and no retry of an attempt ctx ended\n%s\nattempts:%s", got, n, how, srv.history())
		}
		if srv.attempts[0].at != start {
			return fmt.Sprintf("the first attempt went out %v after the call; want at once", srv.attempts[0].at.Sub(start))
		}
		return ""
	})
}
