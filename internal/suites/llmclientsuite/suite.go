// Package llmclientsuite is the one test suite of task 5 (a waiting token
// bucket and a polite LLM client). The exercise and the reference solution
// each run it through a thin adapter, so both are held to exactly the same
// checks. Learners do not edit it.
//
// Every check is a subtest with a fixed name, such as
// TestLLMClient/PoliteClient/RetryAfterIsAFloor. Most have a part with a
// few fixed inputs that say what is meant, and a part whose inputs are
// drawn at random on every run from the run's seed (suitekit.Property,
// suitekit.Rand) and compared with a model of the contract: the bucket's
// waits and order (bucketmodel.go), which answers are retried and how long
// each wait may be (clientmodel.go), pacing against a perfect pacer
// (pacing.go), holds from the rate-limit headers, MaxInFlight, the request
// on the wire and ctx (flow.go). Each failure prints the seed and how to
// replay it.
//
//	WaitingBucket/ExactWaits                 waits against the model, random rates, bursts and arrivals; bad arguments panic
//	WaitingBucket/FirstComeFirstServed       the same for lines of waiters arriving together
//	WaitingBucket/NoStarvation               a large request is not starved by small ones after it
//	WaitingBucket/ContextEndsTheWait         contexts that end at random instants give their tokens back
//	WaitingBucket/MoreThanBurstIsBurst       n above the burst takes the burst; n ≤ 0 returns at once
//	WaitingBucket/ConcurrentNeverFasterThanRate   many goroutines, in a bubble
//	WaitingBucket/ConcurrentRealClock        many goroutines on the real clock, outside any bubble
//	PoliteClient/SendsTheRequest             random params, key and base URL, every attempt on the wire
//	PoliteClient/RetryAfterIsAFloor          backoffs far longer and shorter than retry-after
//	PoliteClient/RetryAfterIsCapped          a retry-after past MaxHold (999999, 1e30, dates) counts as MaxHold
//	PoliteClient/HugeBackoffSaturates        backoff settings near the largest Duration neither overflow nor panic
//	PoliteClient/Retries529WithBackoff       529 is retried with a backoff below its ceiling
//	PoliteClient/RetriesWhatMayPass          random answers and settings: attempts, waits and errors as the model says
//	PoliteClient/JitterSpreadsRetries        retries of a crowd pass a Kolmogorov–Smirnov test for full jitter
//	PoliteClient/RetriesTimeouts             an attempt past AttemptTimeout is retried
//	PoliteClient/RetriesConnectionErrors     a broken connection is retried
//	PoliteClient/NoRetryOn400                a 400 comes back at once
//	PoliteClient/NoRetryOnSpendLimit         so does the spend-limit 429
//	PoliteClient/GivesUpAfterMaxAttempts     random MaxAttempts (6 for zero), then the last error
//	PoliteClient/ContextEndsRetries          ctx ends a backoff, a hold, a bucket wait or an attempt
//	PoliteClient/RespectsMaxInFlight         random MaxInFlight, exactly that many at the busiest; no slot between attempts
//	PoliteClient/SmallBurst                  bursts no larger than the API's after a long idle stretch
//	PoliteClient/PacesRequestsPerMinute      random RPM and arrivals: paced, and not slower than the rate allows
//	PoliteClient/WaitsForInputTokens         the same for ITPM and prompts of random sizes
//	PoliteClient/CachedPrefixIsFree          cached prefixes leave the estimate
//	PoliteClient/SlowsDownOnLowRemaining     random rate-limit headers: the hold as the model says
//	PoliteClient/FinishesNearTheMinimum      a random job against the fake provider, near its minimum, at most one 429
//
// Fixed checks run inside a testing/synctest bubble, and each random case
// in a bubble of its own: time.Now is fake and a sleep only moves the fake
// clock, so waits of seconds are checked to the millisecond in no real
// time. A bubble's clock starts at a random instant up to 2040 and ends in
// 2262, so no check waits for more than a few decades of fake time. The
// client never touches a socket: its http.Client's transport hands each
// request to a scripted API, or to the fake provider, in memory (real
// network I/O would not advance fake time). Every call into the code under
// test turns a panic into a failure of that subtest only.
//
// Timing tolerances: a wait may end up to 1 ms late and never more than
// 1 µs early. Pacing checks allow bursts of up to a tenth of a second of a
// limit's refill (at least one request, plus the request whose tokens were
// collected before the window), the fake API's own bucket: the package's
// BurstWindow is a fifth of that, and a burst of a second or a minute is
// far outside it.
//
// Code that blocks for ever while holding a mutex hangs its subtest instead
// of failing it: a goroutine waiting for a mutex is not durably blocked, so
// synctest cannot tell. Run the tests with -timeout; the timeout report
// names the subtest that was running.
package llmclientsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"ratelab/internal/suites/suitekit"
	"ratelab/provider"
)

// Bucket is the part of a waiting token bucket the suite drives.
type Bucket interface {
	Take(ctx context.Context, n float64) error
}

// Client is the part of a polite client the suite drives.
type Client interface {
	Create(ctx context.Context, params provider.MessageParams) (*provider.Message, error)
}

// Options mirror the fields of llmclient.Options; the adapters copy them
// across field by field.
type Options struct {
	BaseURL        string
	APIKey         string
	HTTPClient     *http.Client
	RPM            float64
	ITPM           float64
	MaxInFlight    int
	MaxAttempts    int
	AttemptTimeout time.Duration
	BaseBackoff    time.Duration
	MaxBackoff     time.Duration
}

// Run runs every check of task 5 as subtests of t: the WaitingBucket
// checks under "WaitingBucket/" and the PoliteClient ones under
// "PoliteClient/". newBucket is NewWaitingBucket (rate in tokens per second,
// burst in tokens); newClient is NewPoliteClient.
func Run(t *testing.T, newBucket func(rate, burst float64) Bucket, newClient func(Options) Client) {
	s := &suite{newBucket: newBucket, newClient: newClient}
	group(t, "WaitingBucket", false, []check{
		{"ExactWaits", s.exactWaits, func(t *testing.T) { s.takesMatchTheModel(t, spread); s.badBucketArgs(t) }},
		{"FirstComeFirstServed", s.firstComeFirstServed, func(t *testing.T) { s.takesMatchTheModel(t, bunched) }},
		{"NoStarvation", s.noStarvation, nil},
		{"ContextEndsTheWait", s.contextEndsTheWait, func(t *testing.T) { s.takesMatchTheModel(t, cancelling) }},
		{"MoreThanBurstIsBurst", s.moreThanBurst, nil},
		{"ConcurrentNeverFasterThanRate", s.concurrentRate, nil},
		{"ConcurrentRealClock", nil, s.concurrentRealClock},
	})
	// Every PoliteClient check runs in bubbles of its own, with nothing
	// on the real clock: two at a time.
	group(t, "PoliteClient", true, []check{
		{"SendsTheRequest", s.sendsTheRequest, s.sendsRandomRequests},
		{"RetryAfterIsAFloor", s.retryAfterIsAFloor, s.retryAfterRegimes},
		{"RetryAfterIsCapped", s.retryAfterIsCappedFixed, s.retryAfterIsCapped},
		{"HugeBackoffSaturates", nil, s.hugeBackoffSaturates},
		{"Retries529WithBackoff", s.retries529, nil},
		{"RetriesWhatMayPass", nil, s.retriesWhatMayPass},
		{"JitterSpreadsRetries", s.jitterSpreadsRetries, nil},
		{"RetriesTimeouts", s.retriesTimeouts, nil},
		{"RetriesConnectionErrors", s.retriesConnectionErrors, nil},
		{"NoRetryOn400", s.noRetryOn400, nil},
		{"NoRetryOnSpendLimit", s.noRetryOnSpendLimit, nil},
		{"GivesUpAfterMaxAttempts", s.givesUp, s.givesUpRandom},
		{"ContextEndsRetries", s.contextEndsRetries, s.contextEndsRandom},
		{"RespectsMaxInFlight", s.respectsMaxInFlight, func(t *testing.T) { s.inFlightRandom(t); s.noSlotBetweenAttempts(t) }},
		{"SmallBurst", s.smallBurst, s.smallBurstRandom},
		{"PacesRequestsPerMinute", s.pacesRequests, s.pacesRequestsRandom},
		{"WaitsForInputTokens", s.waitsForInputTokens, s.waitsForInputTokensRandom},
		{"CachedPrefixIsFree", s.cachedPrefixIsFree, nil},
		{"SlowsDownOnLowRemaining", s.slowsDownOnLowRemaining, s.holdsRandom},
		{"FinishesNearTheMinimum", s.finishesNearTheMinimum, nil},
	})
}

// check is one subtest: a part with fixed inputs (or a few drawn with
// suitekit.Rand), run in a synctest bubble, and a part run outside one:
// random properties, each case in a bubble of its own, and checks on the
// real clock. Either may be nil.
type check struct {
	name    string
	fixed   func(*testing.T)
	outside func(*testing.T)
}

// group runs checks as subtests of a subtest called name, side by side
// (as many as go test's -parallel allows) if parallel: only checks that
// run all in bubbles, whose figures no neighbour can change.
func group(t *testing.T, name string, parallel bool, checks []check) {
	t.Run(name, func(t *testing.T) {
		for _, c := range checks {
			t.Run(c.name, func(t *testing.T) {
				if parallel {
					t.Parallel()
				}
				if c.fixed != nil {
					suitekit.Bubble(t, c.fixed)
				}
				if c.outside != nil && !t.Failed() {
					c.outside(t)
				}
			})
		}
	})
}

type suite struct {
	newBucket func(rate, burst float64) Bucket
	newClient func(Options) Client
}

// Tolerances of every timing check.
const (
	early = time.Microsecond // a wait may end this much early (float rounding)
	late  = time.Millisecond // and this much late
)

// --- Calling the code under test ---

// panics collects the panic reports of goroutines.
type panics struct {
	mu    sync.Mutex
	first string
}

func (p *panics) add(report string) {
	if report == "" {
		return
	}
	p.mu.Lock()
	if p.first == "" {
		p.first = report
	}
	p.mu.Unlock()
}

func (p *panics) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first != "" {
		t.Fatal(p.first)
	}
}

// --- WaitingBucket ---

// bucket wraps a Bucket under test for one subtest.
type bucket struct {
	t     *testing.T
	b     Bucket
	start time.Time
}

func (s *suite) bucket(t *testing.T, rate, burst float64) *bucket {
	t.Helper()
	var b Bucket
	if r := suitekit.Report(fmt.Sprintf("NewWaitingBucket(%v, %v)", rate, burst), func() { b = s.newBucket(rate, burst) }); r != "" {
		t.Fatal(r)
	}
	if b == nil {
		t.Fatalf("NewWaitingBucket(%v, %v) = nil; want a bucket", rate, burst)
	}
	return &bucket{t: t, b: b, start: time.Now()}
}

// now is the fake time since the bucket was made.
func (x *bucket) now() time.Duration { return time.Since(x.start) }

// take calls Take(ctx, n) in this goroutine; a panic fails the subtest.
func (x *bucket) take(ctx context.Context, n float64) error {
	x.t.Helper()
	var err error
	if r := suitekit.Report(fmt.Sprintf("Take(ctx, %v)", n), func() { err = x.b.Take(ctx, n) }); r != "" {
		x.t.Fatal(r)
	}
	return err
}

// expect calls Take(n) with a context that never ends and fails the subtest
// unless it returns nil at want (fake time since the bucket was made).
func (x *bucket) expect(n float64, want time.Duration, why string) {
	x.t.Helper()
	from := x.now()
	if err := x.take(context.Background(), n); err != nil {
		x.t.Fatalf("at t=%v: Take(ctx, %v) = %v; want nil\n%s", from, n, err, why)
	}
	if got := x.now(); !onTime(got, want) {
		x.t.Fatalf("Take(ctx, %v) called at t=%v returned at t=%v; want t=%v\n%s", n, from, got, want, why)
	}
}

// onTime reports whether got is want to within the tolerances.
func onTime(got, want time.Duration) bool { return got >= want-early && got <= want+late }

func (s *suite) exactWaits(t *testing.T) {
	x := s.bucket(t, 10, 2)
	x.expect(1, 0, "a new bucket is full: burst=2 tokens are there at once")
	x.expect(1, 0, "a new bucket is full: burst=2 tokens are there at once")
	x.expect(1, 100*time.Millisecond, "the bucket is empty; at rate=10/s one token takes 100ms")
	x.expect(1, 200*time.Millisecond, "and the next another 100ms")
	x.expect(0.5, 250*time.Millisecond, "half a token takes 50ms")
	time.Sleep(time.Second)
	x.expect(2, 1250*time.Millisecond, "after an idle second the bucket is full again (2 tokens, not 10)")
	x.expect(1, 1350*time.Millisecond, "full means burst=2: the next token takes 100ms")

	x = s.bucket(t, 3, 1)
	x.expect(1, 0, "a new bucket is full")
	x.expect(1, 333333334, "at rate=3/s a token takes 333.33ms")
	x.expect(1, 666666667, "and the next one another 333.33ms")
}

func (s *suite) firstComeFirstServed(t *testing.T) {
	// Five callers queue up on an empty bucket, one after the other: each
	// must get its token 100ms after the previous one, in arrival order.
	x := s.bucket(t, 10, 1)
	x.expect(1, 0, "a new bucket is full")
	var (
		p     panics
		wg    sync.WaitGroup
		mu    sync.Mutex
		order []int
		done  = make([]time.Duration, 5)
	)
	for i := range 5 {
		wg.Go(func() {
			var err error
			p.add(suitekit.Report(fmt.Sprintf("Take(ctx, 1) in waiter %d", i), func() { err = x.b.Take(context.Background(), 1) }))
			mu.Lock()
			defer mu.Unlock()
			done[i] = x.now()
			if err == nil {
				order = append(order, i)
			}
		})
		synctest.Wait() // waiter i is blocked in Take before waiter i+1 comes
	}
	wg.Wait()
	p.check(t)
	for i, got := range done {
		if want := time.Duration(i+1) * 100 * time.Millisecond; !onTime(got, want) {
			t.Fatalf("waiter %d (of 5 that called Take(ctx, 1) in turn on an empty bucket at rate=10/s) returned at t=%v; want t=%v\n"+
				"each waiter gets the next token: 100ms, 200ms, … in arrival order; all returned at %v", i, got, want, done)
		}
	}
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("waiters got their tokens in the order %v; want [0 1 2 3 4], first come first served", order)
	}
}

func (s *suite) noStarvation(t *testing.T) {
	// A caller that needs the whole burst waits behind nobody but those who
	// came before it. Small callers arriving afterwards, faster than the
	// refill, must not keep taking the tokens it is waiting for.
	x := s.bucket(t, 10, 10)
	x.expect(10, 0, "a new bucket holds burst=10 tokens")
	var (
		p       panics
		wg      sync.WaitGroup
		bigDone time.Duration
		bigErr  error
	)
	wg.Go(func() {
		p.add(suitekit.Report("Take(ctx, 10)", func() { bigErr = x.b.Take(context.Background(), 10) }))
		bigDone = x.now()
	})
	synctest.Wait() // the big caller is waiting
	for range 40 {
		time.Sleep(50 * time.Millisecond)
		wg.Go(func() { p.add(suitekit.Report("Take(ctx, 1)", func() { _ = x.b.Take(context.Background(), 1) })) })
	}
	wg.Wait()
	p.check(t)
	if bigErr != nil {
		t.Fatalf("Take(ctx, 10) = %v; want nil", bigErr)
	}
	if want := time.Second; !onTime(bigDone, want) {
		t.Fatalf("Take(ctx, 10), called first on an empty bucket (rate=10/s, burst=10), returned at t=%v; want t=%v\n"+
			"while it waited, 40 callers of Take(ctx, 1) arrived every 50ms; they came later, so they must wait behind it "+
			"instead of taking each token as it drips in (first come, first served, or at least no starvation)", bigDone, want)
	}
}

func (s *suite) contextEndsTheWait(t *testing.T) {
	x := s.bucket(t, 1, 1)
	x.expect(1, 0, "a new bucket is full")

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	err := x.take(ctx, 1)
	if got := x.now(); !errors.Is(err, context.Canceled) || !onTime(got, 300*time.Millisecond) {
		t.Fatalf("Take(ctx, 1) on an empty bucket (rate=1/s) whose ctx is cancelled at t=300ms returned %v at t=%v; want an error wrapping context.Canceled at t=300ms",
			err, got)
	}
	x.expect(1, time.Second, "the cancelled Take must not have taken anything: the next token is still due at t=1s")

	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	from := x.now()
	err = x.take(ctx, 1)
	if got := x.now(); !errors.Is(err, context.DeadlineExceeded) || got > from+500*time.Millisecond+late {
		t.Fatalf("Take(ctx, 1) at t=%v with a 500ms deadline, the next token 1s away, returned %v at t=%v; want an error wrapping context.DeadlineExceeded by t=%v",
			from, err, got, from+500*time.Millisecond)
	}

	time.Sleep(10 * time.Second)
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := x.take(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take(ctx, 1) with a ctx already cancelled, on a full bucket, = %v; want an error wrapping context.Canceled", err)
	}
	x.expect(1, x.now(), "a Take whose ctx was already done must not take anything: the bucket is still full")
}

func (s *suite) moreThanBurst(t *testing.T) {
	x := s.bucket(t, 1, 2)
	x.expect(5, 0, "n=5 > burst=2 is treated as 2: a full bucket has them at once")
	x.expect(1, time.Second, "Take(5) took the whole burst of 2: the next token is 1s away")
	x.expect(5, 3*time.Second, "n=5 on an empty bucket waits for the burst of 2 (2s), not for 5 tokens (which would never come)")
	x.expect(0, 3*time.Second, "Take(0) returns at once, even on an empty bucket")
	x.expect(-1, 3*time.Second, "Take(n < 0) returns at once")
	x.expect(1, 4*time.Second, "and takes nothing")
}

func (s *suite) concurrentRate(t *testing.T) {
	// Eight goroutines take 25 tokens each, one at a time. Whatever the
	// interleaving, no window of time may see more than burst + rate×window
	// tokens handed out, and the whole lot takes (200 − burst)/rate.
	const (
		goroutines = 8
		each       = 25
		rate       = 50.0
		burst      = 5.0
	)
	x := s.bucket(t, rate, burst)
	var (
		p     panics
		wg    sync.WaitGroup
		mu    sync.Mutex
		times []time.Duration
	)
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				var err error
				p.add(suitekit.Report(fmt.Sprintf("Take(ctx, 1) in goroutine %d", g), func() { err = x.b.Take(context.Background(), 1) }))
				if err != nil {
					p.add(fmt.Sprintf("Take(ctx, 1) in goroutine %d = %v; want nil", g, err))
				}
				mu.Lock()
				times = append(times, x.now())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	p.check(t)
	if msg := burstiness(times, ones(len(times)), rate, burst); msg != "" {
		t.Fatalf("%d goroutines × %d Take(ctx, 1) at rate=%v/s, burst=%v: %s\n"+
			"the bucket hands out too much: lost updates? Take must read and change the bucket under a mutex", goroutines, each, rate, burst, msg)
	}
	last := slices.Max(times)
	if want := time.Duration((goroutines*each - burst) / rate * float64(time.Second)); last > want+late {
		t.Fatalf("%d goroutines × %d Take(ctx, 1) at rate=%v/s, burst=%v finished at t=%v; want t=%v: (200 − burst)/rate",
			goroutines, each, rate, burst, last, want)
	}
}

func ones(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// burstiness checks that events at times, of the given sizes, never put
// more than burst + rate×(t_j − t_i) into any window [t_i, t_j], and says
// how they did if they did.
func burstiness(times []time.Duration, sizes []float64, rate, burst float64) string {
	type ev struct {
		at   time.Duration
		size float64
	}
	evs := make([]ev, len(times))
	for i := range times {
		evs[i] = ev{times[i], sizes[i]}
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return int(a.at - b.at) })
	for i := range evs {
		sum := 0.0
		for j := i; j < len(evs); j++ {
			sum += evs[j].size
			window := evs[j].at - evs[i].at
			if allowed := burst + rate*window.Seconds(); sum > allowed+1e-6 {
				return fmt.Sprintf("%v between t=%v and t=%v; want at most burst + rate×%v = %.6g", sum, evs[i].at, evs[j].at, window, allowed)
			}
		}
	}
	return ""
}

// --- PoliteClient ---

// A reply is what the scripted API answers to one attempt.
type reply struct {
	status     int    // 0 means 200
	errType    string // error.type of an error answer
	errCode    string // error.details.error_code
	retryAfter string
	retryAt    func(now time.Time) string // a retry-after worked out when the attempt arrives
	header     map[string]string          // extra headers
	delay      time.Duration              // answer after this long
	hang       bool                       // never answer: block until the request's context ends
	netErr     error                      // fail like a broken connection instead of answering
	usage      *provider.Usage            // of a 200; default: all input uncached, 2 output tokens
}

// call is one attempt the scripted API received.
type call struct {
	at     time.Duration // fake time since the API was made
	method string
	url    string
	header http.Header
	params provider.MessageParams
	raw    []byte
	when   time.Time // the fake time it arrived
	answer string    // the retry-after header of its answer, if any
}

// api is a scripted Messages API inside the bubble: an http.RoundTripper
// that answers each attempt with script(n, params), n counting attempts
// from 0.
type api struct {
	script func(n int, p provider.MessageParams) reply
	start  time.Time

	mu          sync.Mutex
	calls       []call
	inFlight    int
	maxInFlight int
}

func newAPI(script func(n int, p provider.MessageParams) reply) *api {
	return &api{script: script, start: time.Now()}
}

func (a *api) RoundTrip(req *http.Request) (*http.Response, error) {
	var raw []byte
	if req.Body != nil {
		raw, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	var p provider.MessageParams
	_ = json.Unmarshal(raw, &p)
	a.mu.Lock()
	n := len(a.calls)
	a.calls = append(a.calls, call{at: time.Since(a.start), method: req.Method, url: req.URL.String(), header: req.Header.Clone(), params: p, raw: raw, when: time.Now()})
	a.inFlight++
	a.maxInFlight = max(a.maxInFlight, a.inFlight)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.inFlight--
		a.mu.Unlock()
	}()

	ctx := req.Context()
	r := a.script(n, p)
	if r.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if r.delay > 0 {
		timer := time.NewTimer(r.delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if r.netErr != nil {
		return nil, r.netErr
	}
	resp := r.response(req, n, p)
	a.mu.Lock()
	a.calls[n].answer = resp.Header.Get(provider.HeaderRetryAfter)
	a.mu.Unlock()
	return resp, nil
}

func (r reply) response(req *http.Request, n int, p provider.MessageParams) *http.Response {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	var body any
	if status == http.StatusOK {
		u := provider.Usage{InputTokens: provider.CountTokens(p), OutputTokens: 2}
		if r.usage != nil {
			u = *r.usage
		}
		body = provider.Message{
			ID: fmt.Sprintf("msg_test%d", n), Type: "message", Role: "assistant", Model: p.Model,
			Content: []provider.TextBlock{provider.Text("judged " + strconv.Itoa(n))}, StopReason: "end_turn", Usage: u,
		}
	} else {
		eb := provider.ErrorBody{Type: "error", Error: provider.ErrorDetail{Type: r.errType, Message: "scripted " + http.StatusText(status)}}
		if r.errCode != "" {
			eb.Error.Details = &provider.ErrorDetails{ErrorCode: r.errCode}
		}
		body = eb
	}
	b, _ := json.Marshal(body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(provider.HeaderRequestID, fmt.Sprintf("req_test%d", n))
	if r.retryAfter != "" {
		h.Set(provider.HeaderRetryAfter, r.retryAfter)
	}
	if r.retryAt != nil {
		h.Set(provider.HeaderRetryAfter, r.retryAt(time.Now()))
	}
	for k, v := range r.header {
		h.Set(k, v)
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req,
	}
}

func (a *api) snapshot() []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// attemptsOf returns the calls whose prompt is p's, by its last message.
func attemptsOf(calls []call, p provider.MessageParams) []call {
	var out []call
	for _, c := range calls {
		if lastText(c.params) == lastText(p) {
			out = append(out, c)
		}
	}
	return out
}

func lastText(p provider.MessageParams) string {
	if len(p.Messages) == 0 {
		return ""
	}
	var b strings.Builder
	for _, c := range p.Messages[len(p.Messages)-1].Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// handlerTransport serves each request with an http.Handler in the calling
// goroutine: the fake provider, in memory, inside the bubble.
type handlerTransport struct{ h http.Handler }

func (tr handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	tr.h.ServeHTTP(w, req)
	if req.Body != nil {
		req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err // the client gave up; no answer reached it
	}
	resp := w.Result()
	resp.Request = req
	return resp, nil
}

// The scripted API's address and key, drawn once per run from the run's
// seed, so that no code can tell the tests by them.
var testURL, testKey = endpoint()

func endpoint() (string, string) {
	r := rand.New(rand.NewPCG(suitekit.Seed(), 0x5eed))
	word := func(n int) string {
		const letters = "abcdefghijklmnopqrstuvwxyz"
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		return string(b)
	}
	scheme := []string{"http", "https"}[r.IntN(2)]
	host := word(3+r.IntN(8)) + "." + []string{"com", "net", "io", "internal", "example.org"}[r.IntN(5)]
	if r.IntN(2) == 0 {
		host += ":" + strconv.Itoa(1024+r.IntN(60000))
	}
	const key = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	k := make([]byte, 40+r.IntN(60))
	for i := range k {
		k[i] = key[r.IntN(len(key))]
	}
	return scheme + "://" + host, "sk-ant-api03-" + string(k)
}

// baseOptions are the settings of most client checks: no rate limits, room
// for 100 requests in flight, 5 attempts, short backoffs.
func baseOptions(rt http.RoundTripper) Options {
	return Options{
		BaseURL: testURL, APIKey: testKey, HTTPClient: &http.Client{Transport: rt},
		MaxInFlight: 100, MaxAttempts: 5, AttemptTimeout: time.Minute,
		BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
	}
}

// client makes a client under test.
func (s *suite) client(t *testing.T, o Options) Client {
	t.Helper()
	var c Client
	if r := suitekit.Report("NewPoliteClient(opts)", func() { c = s.newClient(o) }); r != "" {
		t.Fatal(r)
	}
	if c == nil {
		t.Fatal("NewPoliteClient(opts) = nil; want a client")
	}
	return c
}

// prompt returns judgment i's request: one user message of exactly tokens
// input tokens that names i, and max_tokens 16.
func prompt(i, tokens int) provider.MessageParams {
	text := fmt.Sprintf("judgment %d: is the document relevant to the query? ", i)
	for len(text) < 4*tokens {
		text += "query and document text "
	}
	return provider.MessageParams{
		Model: "claude-test", MaxTokens: 16,
		Messages: []provider.MessageParam{{Role: "user", Content: provider.Blocks{provider.Text(text[:4*tokens])}}},
	}
}

// result is what one Create returned.
type result struct {
	msg  *provider.Message
	err  error
	done time.Duration // fake time since start
}

// create calls Create in this goroutine; a panic fails the subtest.
func create(t *testing.T, c Client, ctx context.Context, p provider.MessageParams) (*provider.Message, error) {
	t.Helper()
	var (
		msg *provider.Message
		err error
	)
	if r := suitekit.Report("Create(ctx, params)", func() { msg, err = c.Create(ctx, p) }); r != "" {
		t.Fatal(r)
	}
	return msg, err
}

// createAll calls Create for every prompt at once, each in its own
// goroutine, waits for all of them and fails the subtest if any panicked.
func createAll(t *testing.T, c Client, ctx context.Context, ps []provider.MessageParams) []result {
	t.Helper()
	start := time.Now()
	var (
		p   panics
		wg  sync.WaitGroup
		out = make([]result, len(ps))
	)
	for i, pp := range ps {
		wg.Go(func() {
			p.add(suitekit.Report(fmt.Sprintf("Create(ctx, prompt %d)", i), func() { out[i].msg, out[i].err = c.Create(ctx, pp) }))
			out[i].done = time.Since(start)
		})
	}
	wg.Wait()
	p.check(t)
	return out
}

// allOK fails the subtest unless every result is a message.
func allOK(t *testing.T, rs []result, what string) {
	t.Helper()
	for i, r := range rs {
		if r.err != nil || r.msg == nil {
			t.Fatalf("%s: Create of prompt %d returned (%v, %v); want a message", what, i, r.msg, r.err)
		}
	}
}

// timeout is the context of most client checks: long in fake time, so a
// client that waits for ever fails instead of hanging.
func timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Minute)
}

func gaps(calls []call) []time.Duration {
	var g []time.Duration
	for i := 1; i < len(calls); i++ {
		g = append(g, calls[i].at-calls[i-1].at)
	}
	return g
}

func (s *suite) sendsTheRequest(t *testing.T) {
	// The zero BaseURL and HTTPClient: DefaultBaseURL through
	// http.DefaultClient, whose transport is the scripted API for now.
	d := newAPI(func(int, provider.MessageParams) reply { return reply{} })
	saved := http.DefaultClient.Transport
	http.DefaultClient.Transport = d
	defer func() { http.DefaultClient.Transport = saved }()
	c0, failure := s.newClientOf(Options{APIKey: testKey})
	if failure == "" {
		ctx, cancel := timeout()
		var err error
		failure = suitekit.Report("Create(ctx, params)", func() { _, err = c0.Create(ctx, prompt(3, 20)) })
		cancel()
		calls := d.snapshot()
		if failure == "" && (err != nil || len(calls) != 1 || calls[0].url != defaultBaseURL+"/v1/messages") {
			failure = fmt.Sprintf("with a zero BaseURL and HTTPClient, Create = %v after %d attempts through http.DefaultClient; want a message after 1, sent to %s/v1/messages\n"+
				"a zero field of Options means its default: DefaultBaseURL and http.DefaultClient", err, len(calls), defaultBaseURL)
			if len(calls) > 0 {
				failure += fmt.Sprintf(" (it went to %s)", calls[0].url)
			}
		}
	}
	if failure != "" {
		t.Fatal(failure)
	}

	a := newAPI(func(int, provider.MessageParams) reply { return reply{} })
	c := s.client(t, baseOptions(a))
	ctx, cancel := timeout()
	defer cancel()
	p := prompt(7, 40)
	p.System = provider.Blocks{{Type: "text", Text: "You judge relevance.", CacheControl: provider.Ephemeral()}}
	msg, err := create(t, c, ctx, p)
	if err != nil || msg == nil {
		t.Fatalf("Create(ctx, params) = (%v, %v); want the API's message", msg, err)
	}
	if msg.ID != "msg_test0" || msg.Text() != "judged 0" || msg.Usage.InputTokens != provider.CountTokens(p) {
		t.Fatalf("Create returned %+v; want the message the API sent: id msg_test0, text \"judged 0\", usage %+v", msg, provider.Usage{InputTokens: provider.CountTokens(p), OutputTokens: 2})
	}
	calls := a.snapshot()
	if len(calls) != 1 {
		t.Fatalf("the API received %d attempts; want 1", len(calls))
	}
	got := calls[0]
	if got.method != http.MethodPost || got.url != testURL+"/v1/messages" {
		t.Fatalf("the request was %s %s; want POST %s/v1/messages", got.method, got.url, testURL)
	}
	if k := got.header.Get(provider.HeaderAPIKey); k != testKey {
		t.Fatalf("x-api-key = %q; want %q, Options.APIKey", k, testKey)
	}
	if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q; want application/json", ct)
	}
	want, _ := json.Marshal(p)
	have, _ := json.Marshal(got.params)
	if !bytes.Equal(want, have) {
		t.Fatalf("the API received the body %s\nwant the params as JSON: %s", got.raw, want)
	}
}

func (s *suite) retryAfterIsAFloor(t *testing.T) {
	a := newAPI(func(n int, _ provider.MessageParams) reply {
		switch n {
		case 0:
			return reply{status: 429, errType: provider.ErrorRateLimit, retryAfter: "3"}
		case 1:
			return reply{status: 429, errType: provider.ErrorRateLimit, retryAfter: "2"}
		}
		return reply{}
	})
	o := baseOptions(a) // backoff alone would be under 100ms, then 200ms
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	msg, err := create(t, c, ctx, prompt(1, 20))
	calls := a.snapshot()
	if err != nil || msg == nil || len(calls) != 3 {
		t.Fatalf("the API answered 429 (retry-after 3), 429 (retry-after 2), 200; Create made %d attempts and returned (%v, %v); want 3 attempts and the message",
			len(calls), msg, err)
	}
	for i, g := range gaps(calls) {
		ra := time.Duration(3-i) * time.Second
		if g < ra-early || g > ra+o.MaxBackoff+time.Second {
			t.Fatalf("after a 429 with retry-after: %d the client waited %v before retrying; want at least %v (retry-after is a floor), and not much more (at most %v)\n"+
				"all gaps: %v", int(ra.Seconds()), g, ra, ra+o.MaxBackoff+time.Second, gaps(calls))
		}
	}
}

func (s *suite) retries529(t *testing.T) {
	a := newAPI(func(n int, _ provider.MessageParams) reply {
		if n < 3 {
			return reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded}
		}
		return reply{}
	})
	o := baseOptions(a)
	o.BaseBackoff, o.MaxBackoff = time.Second, 3*time.Second
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	msg, err := create(t, c, ctx, prompt(1, 20))
	calls := a.snapshot()
	if err != nil || msg == nil || len(calls) != 4 {
		t.Fatalf("the API answered 529 three times, then 200; Create made %d attempts and returned (%v, %v); want 4 attempts and the message\n"+
			"529 overloaded_error is worth retrying", len(calls), msg, err)
	}
	g := gaps(calls)
	var total time.Duration
	for k, d := range g {
		ceiling := min(o.MaxBackoff, o.BaseBackoff<<k)
		if d > ceiling+late {
			t.Fatalf("retry %d after a 529 came %v after the previous attempt; want at most min(MaxBackoff, BaseBackoff×2^%d) = %v (full jitter: uniform in [0, that])\nall gaps: %v",
				k, d, k, ceiling, g)
		}
		total += d
	}
	if total < 10*time.Millisecond {
		t.Fatalf("three retries after 529s came %v apart; want a backoff between them (full jitter in [0, BaseBackoff×2^k]), not immediate retries", g)
	}
}

func (s *suite) jitterSpreadsRetries(t *testing.T) {
	// A hundred calls fail together with 529; their retries must not come
	// back together.
	tries := map[string]int{}
	var mu sync.Mutex
	a := newAPI(func(_ int, p provider.MessageParams) reply {
		mu.Lock()
		defer mu.Unlock()
		tries[lastText(p)]++
		if tries[lastText(p)] == 1 {
			return reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded}
		}
		return reply{}
	})
	o := baseOptions(a)
	o.BaseBackoff, o.MaxBackoff = time.Second, 8*time.Second
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	ps := make([]provider.MessageParams, 100)
	for i := range ps {
		ps[i] = prompt(i, 20)
	}
	allOK(t, createAll(t, c, ctx, ps), "100 calls, each answered 529 once")
	calls := a.snapshot()
	var retries []time.Duration
	for _, p := range ps {
		if cs := attemptsOf(calls, p); len(cs) == 2 {
			retries = append(retries, cs[1].at)
		}
	}
	if len(retries) != len(ps) {
		t.Fatalf("%d of 100 calls made exactly 2 attempts; want all of them (one 529, then 200)", len(retries))
	}
	distinct := len(slices.Compact(slices.Sorted(slices.Values(retries))))
	spread := slices.Max(retries) - slices.Min(retries)
	if distinct < 50 || spread < 300*time.Millisecond {
		t.Fatalf("100 calls that all got a 529 at t=0 retried at %d distinct times spread over %v; want them spread out (≥ 50 distinct times over ≥ 300ms)\n"+
			"without jitter every client comes back at the same instant, which is the lockstep wave of the lesson: use full jitter", distinct, spread)
	}
	s.jitterIsUniform(t)
}

func (s *suite) retriesTimeouts(t *testing.T) {
	a := newAPI(func(n int, _ provider.MessageParams) reply {
		if n == 0 {
			return reply{hang: true}
		}
		return reply{}
	})
	o := baseOptions(a)
	o.AttemptTimeout = 2 * time.Second
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	msg, err := create(t, c, ctx, prompt(1, 20))
	calls := a.snapshot()
	if err != nil || msg == nil || len(calls) != 2 {
		t.Fatalf("the first attempt never got an answer; Create (AttemptTimeout 2s) made %d attempts and returned (%v, %v); want 2 attempts and the message\n"+
			"an attempt that times out is retried", len(calls), msg, err)
	}
	if g := calls[1].at; g < 2*time.Second-early || g > 2*time.Second+o.MaxBackoff+late {
		t.Fatalf("the retry of an attempt that timed out after AttemptTimeout=2s came at t=%v; want between 2s and 2s + MaxBackoff", g)
	}
}

func (s *suite) retriesConnectionErrors(t *testing.T) {
	a := newAPI(func(n int, _ provider.MessageParams) reply {
		if n < 2 {
			return reply{netErr: errors.New("read tcp 127.0.0.1:51234->127.0.0.1:8080: read: connection reset by peer")}
		}
		return reply{}
	})
	c := s.client(t, baseOptions(a))
	ctx, cancel := timeout()
	defer cancel()
	msg, err := create(t, c, ctx, prompt(1, 20))
	if calls := a.snapshot(); err != nil || msg == nil || len(calls) != 3 {
		t.Fatalf("two attempts failed with a connection error, then the API answered 200; Create made %d attempts and returned (%v, %v); want 3 attempts and the message",
			len(calls), msg, err)
	}
}

// expectNoRetry runs one Create against an API that always answers r and
// checks it made one attempt and returned an *provider.APIError with the
// status, even after a long wait.
func (s *suite) expectNoRetry(t *testing.T, r reply, what string) *provider.APIError {
	t.Helper()
	a := newAPI(func(int, provider.MessageParams) reply { return r })
	c := s.client(t, baseOptions(a))
	ctx, cancel := timeout()
	defer cancel()
	msg, err := create(t, c, ctx, prompt(1, 20))
	time.Sleep(10 * time.Minute) // nothing must keep retrying in the background
	calls := a.snapshot()
	var apiErr *provider.APIError
	if !errors.As(err, &apiErr) || msg != nil {
		t.Fatalf("the API answered %s; Create returned (%v, %v); want an error that wraps the *provider.APIError (use errors.As on it)", what, msg, err)
	}
	if len(calls) != 1 {
		t.Fatalf("the API answered %s; Create made %d attempts; want exactly 1: retrying cannot help, the answer will be the same", what, len(calls))
	}
	if apiErr.StatusCode != r.status || apiErr.Type != r.errType {
		t.Fatalf("the API answered %s; the error is %d %s; want %d %s", what, apiErr.StatusCode, apiErr.Type, r.status, r.errType)
	}
	return apiErr
}

func (s *suite) noRetryOn400(t *testing.T) {
	s.expectNoRetry(t, reply{status: 400, errType: provider.ErrorInvalidRequest}, "400 invalid_request_error")
}

func (s *suite) noRetryOnSpendLimit(t *testing.T) {
	e := s.expectNoRetry(t, reply{status: 429, errType: provider.ErrorRateLimit, errCode: provider.ErrorCodeSpendLimit},
		"429 with error.details.error_code enforced_spend_limit_reached and no retry-after")
	if !e.SpendLimit() {
		t.Fatalf("the error's ErrorCode is %q; want %q (read it with provider.ReadError)", e.ErrorCode, provider.ErrorCodeSpendLimit)
	}
}

func (s *suite) givesUp(t *testing.T) {
	for _, r := range []reply{
		{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded},
		{status: 429, errType: provider.ErrorRateLimit, retryAfter: "1"},
	} {
		a := newAPI(func(int, provider.MessageParams) reply { return r })
		o := baseOptions(a)
		o.MaxAttempts = 3
		c := s.client(t, o)
		ctx, cancel := timeout()
		msg, err := create(t, c, ctx, prompt(1, 20))
		cancel()
		calls := a.snapshot()
		var apiErr *provider.APIError
		if len(calls) != 3 || msg != nil || !errors.As(err, &apiErr) || apiErr.StatusCode != r.status {
			t.Fatalf("the API always answered %d; Create with MaxAttempts=3 made %d attempts and returned (%v, %v); want 3 attempts and an error wrapping the last *provider.APIError (%d)",
				r.status, len(calls), msg, err, r.status)
		}
	}
}

func (s *suite) contextEndsRetries(t *testing.T) {
	a := newAPI(func(int, provider.MessageParams) reply {
		return reply{status: 429, errType: provider.ErrorRateLimit, retryAfter: "30"}
	})
	c := s.client(t, baseOptions(a))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	msg, err := create(t, c, ctx, prompt(1, 20))
	took := time.Since(start)
	if msg != nil || !errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second+late {
		t.Fatalf("with a 5s deadline and a 429 asking for 30s, Create returned (%v, %v) after %v; want an error wrapping context.DeadlineExceeded by 5s\n"+
			"the wait before a retry must end when ctx does", msg, err, took)
	}
	if n := len(a.snapshot()); n != 1 {
		t.Fatalf("Create made %d attempts; want 1 (the retry was due after the deadline)", n)
	}
}

func (s *suite) respectsMaxInFlight(t *testing.T) {
	a := newAPI(func(int, provider.MessageParams) reply { return reply{delay: time.Second} })
	o := baseOptions(a)
	o.MaxInFlight = 4
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	ps := make([]provider.MessageParams, 20)
	for i := range ps {
		ps[i] = prompt(i, 20)
	}
	rs := createAll(t, c, ctx, ps)
	allOK(t, rs, "20 calls of 1s each")
	a.mu.Lock()
	most := a.maxInFlight
	a.mu.Unlock()
	if most != 4 {
		t.Fatalf("20 calls at once with MaxInFlight=4, each answered after 1s: at most %d were in flight together; want exactly 4\n"+
			"a semaphore of MaxInFlight slots, held from just before the attempt is sent until its answer is in", most)
	}
	last := slices.MaxFunc(rs, func(a, b result) int { return int(a.done - b.done) }).done
	if last > 5*time.Second+late {
		t.Fatalf("20 calls of 1s, 4 at a time, finished at t=%v; want t=5s: keep all 4 slots busy", last)
	}
}

// sendTimes returns when each attempt arrived.
func sendTimes(calls []call) []time.Duration {
	ts := make([]time.Duration, len(calls))
	for i, c := range calls {
		ts[i] = c.at
	}
	return ts
}

func (s *suite) smallBurst(t *testing.T) {
	a := newAPI(func(int, provider.MessageParams) reply { return reply{} })
	o := baseOptions(a)
	o.RPM = 600 // 10 a second
	c := s.client(t, o)
	time.Sleep(time.Minute) // an idle minute: the client's bucket is as full as it gets
	ctx, cancel := timeout()
	defer cancel()
	ps := make([]provider.MessageParams, 30)
	for i := range ps {
		ps[i] = prompt(i, 20)
	}
	allOK(t, createAll(t, c, ctx, ps), "30 calls")
	times := sendTimes(a.snapshot())
	first := 0
	for _, at := range times {
		if at == times[0] {
			first++
		}
	}
	if msg := burstinessAfter(times, ones(len(times)), 10, allowedBurst(10)); msg != "" {
		t.Fatalf("RPM=600 after an idle minute, 30 calls at once: %d were sent in the first instant; %s\n"+
			"a per-minute limit is a rate (10 a second here), not an allowance to spend at once: keep the bucket's burst small "+
			"(BurstWindow of refill; the API's own bucket holds a tenth of a second, and a burst of the whole minute is refused)", first, msg)
	}
}

func (s *suite) pacesRequests(t *testing.T) {
	a := newAPI(func(int, provider.MessageParams) reply { return reply{} })
	o := baseOptions(a)
	o.RPM = 600
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	ps := make([]provider.MessageParams, 40)
	for i := range ps {
		ps[i] = prompt(i, 20)
	}
	allOK(t, createAll(t, c, ctx, ps), "40 calls")
	times := sendTimes(a.snapshot())
	if msg := burstinessAfter(times, ones(len(times)), 10, allowedBurst(10)); msg != "" {
		t.Fatalf("RPM=600 (10 a second), 40 calls at once: %s\nwait on a bucket of RPM/60 requests a second before every attempt", msg)
	}
	if last, want := slices.Max(times), 3900*time.Millisecond; last > want+late {
		t.Fatalf("RPM=600, 40 calls at once: the last was sent at t=%v; want by t=%v ((40 − 1)/10 s): the client should use the rate it is allowed", last, want)
	}
}

func (s *suite) waitsForInputTokens(t *testing.T) {
	a := newAPI(func(int, provider.MessageParams) reply { return reply{} })
	o := baseOptions(a)
	o.ITPM = 60_000 // 1000 input tokens a second; no request limit
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	ps := make([]provider.MessageParams, 20)
	for i := range ps {
		ps[i] = prompt(i, 500)
	}
	allOK(t, createAll(t, c, ctx, ps), "20 calls of 500 input tokens")
	calls := a.snapshot()
	times := sendTimes(calls)
	sizes := make([]float64, len(calls))
	for i, cl := range calls {
		sizes[i] = float64(provider.CountTokens(cl.params))
	}
	if msg := burstinessAfter(times, sizes, 1000, allowedBurst(1000)); msg != "" {
		t.Fatalf("ITPM=60000 (1000 tokens a second), 20 prompts of 500 tokens at once: input tokens sent %s\n"+
			"estimate each request's input tokens (provider.CountTokens) and wait on a bucket of ITPM/60 tokens a second for them, as well as on the request bucket;\n"+
			"a prompt larger than the bucket's burst is taken in pieces, one request at a time, or requests collect their pieces side by side and go out together", msg)
	}
	if last, want := slices.Max(times), 10450*time.Millisecond; last > want {
		t.Fatalf("ITPM=60000, 20 prompts of 500 tokens: the last was sent at t=%v; want by t=%v (10000 tokens at 1000/s, with 10%% to spare): "+
			"over-estimating the tokens wastes the limit", last, want)
	}
}

// providerClient returns a fake provider made with cfg inside the bubble,
// and options that reach it in memory.
func providerClient(t *testing.T, cfg provider.Config) (*provider.Server, Options) {
	t.Helper()
	srv, err := provider.New(cfg)
	if err != nil {
		t.Fatalf("provider.New: %v", err)
	}
	o := baseOptions(handlerTransport{srv})
	return srv, o
}

func (s *suite) cachedPrefixIsFree(t *testing.T) {
	// A prefix of 1100 to 4000 tokens, shared by 10 to 30 calls of 50
	// tokens more each, at 500 to 2000 uncached input tokens a second.
	r := suitekit.Rand(t)
	prefix, calls := 1100+r.IntN(2901), 10+r.IntN(21)
	rate := 500 + 1500*r.Float64()
	cfg := provider.DefaultConfig()
	cfg.RequestsPerMinute = 60_000
	cfg.InputTokensPerMinute = math.Round(rate * 60)
	cfg.OutputTokensPerMinute = 6_000_000
	// The first, uncached prompt must fit in the API's bucket twice over,
	// or its answer's headers rightly ask the client to hold a while.
	cfg.Burst = max(3*time.Second, time.Duration(float64(prefix+50)/rate*2.4*float64(time.Second)))
	cfg.BaseLatency, cfg.PerTokenLatency = 100*time.Millisecond, 0
	srv, o := providerClient(t, cfg)
	o.ITPM = cfg.InputTokensPerMinute
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()

	instructions := strings.Repeat("Judge how relevant the document is to the query, from 0 to 3. ", 300)[:4*prefix]
	judgment := func(i int) provider.MessageParams {
		p := prompt(i, 50)
		p.System = provider.Blocks{{Type: "text", Text: instructions, CacheControl: provider.Ephemeral()}}
		return p
	}
	if _, err := create(t, c, ctx, judgment(0)); err != nil {
		t.Fatalf("the first call, which writes the prefix to the cache: Create = %v; want a message", err)
	}
	start := time.Now()
	ps := make([]provider.MessageParams, calls)
	for i := range ps {
		ps[i] = judgment(i + 1)
	}
	rs := createAll(t, c, ctx, ps)
	allOK(t, rs, fmt.Sprintf("%d calls sharing a cached prefix", calls))
	took := time.Since(start)
	st := srv.KeyStats(testKey)
	if st.CacheReadInputTokens < int64(calls*prefix) {
		t.Fatalf("the API read %d tokens from its cache; want %d × %d: send the system prompt with its cache_control", st.CacheReadInputTokens, calls, prefix)
	}
	cached := time.Duration(float64(calls*50) / rate * float64(time.Second))
	uncached := time.Duration(float64(calls*(prefix+50)) / rate * float64(time.Second))
	if limit := cached*3/2 + time.Second; took > limit || st.TooManyRequests() > 0 {
		t.Fatalf("after one call wrote a %d-token prefix to the cache, %d calls of that prefix plus 50 tokens each took %v, with %d 429s; "+
			"want at most %v and no 429: uncached they cost %d tokens (%v at %.0f a second), but charged in full %d (%v)\n"+
			"cache reads do not count against ITPM: once an answer shows the prefix was served from the cache "+
			"(usage.cache_read_input_tokens), leave the prefix (provider.CachePrefix) out of the estimate",
			prefix, calls, took, st.TooManyRequests(), limit, calls*50, cached, rate, calls*(prefix+50), uncached)
	}
}

// limitHeaders returns the rate-limit headers of an answer: requests and
// input tokens, each with its limit, remaining and reset after a wait.
func limitHeaders(reqRemaining, reqLimit int, reqReset time.Duration, inRemaining, inLimit int, inReset time.Duration) map[string]string {
	now := time.Now()
	return map[string]string{
		provider.HeaderRequestsLimit:        strconv.Itoa(reqLimit),
		provider.HeaderRequestsRemaining:    strconv.Itoa(reqRemaining),
		provider.HeaderRequestsReset:        now.Add(reqReset).UTC().Format(time.RFC3339Nano),
		provider.HeaderInputTokensLimit:     strconv.Itoa(inLimit),
		provider.HeaderInputTokensRemaining: strconv.Itoa(inRemaining),
		provider.HeaderInputTokensReset:     now.Add(inReset).UTC().Format(time.RFC3339Nano),
	}
}

func (s *suite) slowsDownOnLowRemaining(t *testing.T) {
	a := newAPI(func(n int, _ provider.MessageParams) reply {
		switch n {
		case 0: // no request left; 1 a second
			return reply{header: limitHeaders(0, 60, time.Second, 500_000, 600_000, 0)}
		case 2: // 100 input tokens left, 1000 a second; this prompt had 600
			return reply{header: limitHeaders(50, 60, 0, 100, 60_000, 500*time.Millisecond)}
		}
		return reply{header: limitHeaders(59, 60, 0, 599_000, 600_000, 0)} // plenty
	})
	c := s.client(t, baseOptions(a)) // no limits of its own: only the headers slow it
	ctx, cancel := timeout()
	defer cancel()
	for i, step := range []struct {
		min, max time.Duration
		why      string
	}{
		{0, 0, "the first call goes at once"},
		{time.Second, 1500 * time.Millisecond, "the previous answer said requests-remaining: 0 with a limit of 60 a minute (1 a second) and a reset 1s away: " +
			"wait about 1s before the next attempt instead of being refused"},
		{0, 0, "the previous answer had plenty left: no need to wait"},
		{500 * time.Millisecond, time.Second, "the previous answer said input-tokens-remaining: 100, fewer than the 600 of that prompt, " +
			"with a limit of 60000 a minute (1000 a second) and a reset 500ms away: wait about 500ms"},
	} {
		from := len(a.snapshot())
		calledAt := time.Since(a.start)
		if _, err := create(t, c, ctx, prompt(i, 600)); err != nil {
			t.Fatalf("call %d: Create = %v; want a message", i, err)
		}
		calls := a.snapshot()
		if len(calls) != from+1 {
			t.Fatalf("call %d made %d attempts; want 1", i, len(calls)-from)
		}
		sent := calls[from].at - calledAt
		if sent < step.min-early || sent > step.max+late {
			t.Fatalf("call %d was sent %v after Create was called; want between %v and %v\n%s", i, sent, step.min, step.max, step.why)
		}
	}
}

func (s *suite) finishesNearTheMinimum(t *testing.T) {
	// The lesson's problem in small, with limits, prompts and latency drawn
	// at random: 60 to 150 prompts of 300 to 2000 tokens against 300 to
	// 1200 RPM and 100,000 to 600,000 ITPM. The client knows the limits.
	r := suitekit.Rand(t)
	n, tokens := 60+r.IntN(91), 300+r.IntN(1701)
	cfg := provider.DefaultConfig()
	cfg.RequestsPerMinute = float64(300 + r.IntN(901))
	cfg.InputTokensPerMinute = float64(100_000 + r.IntN(500_001))
	cfg.OutputTokensPerMinute = 6_000_000
	// The API's bucket holds 250 ms to 1 s of its refill, and at least
	// three prompts: a prompt it could never admit is no test of pacing.
	cfg.Burst = max(time.Duration(250+r.IntN(751))*time.Millisecond,
		time.Duration(3*float64(tokens)/(cfg.InputTokensPerMinute/60)*float64(time.Second)))
	latency := time.Duration(50+r.IntN(251)) * time.Millisecond
	cfg.BaseLatency, cfg.PerTokenLatency = latency, 0
	srv, o := providerClient(t, cfg)
	o.RPM, o.ITPM = cfg.RequestsPerMinute, cfg.InputTokensPerMinute
	// Little's Law: the request rate times the latency, and room to spare.
	perSecond := min(o.RPM/60, o.ITPM/60/float64(tokens))
	o.MaxInFlight = int(perSecond*latency.Seconds()*2) + 4
	c := s.client(t, o)
	ctx, cancel := timeout()
	defer cancel()
	ps := make([]provider.MessageParams, n)
	for i := range ps {
		ps[i] = prompt(i, tokens)
	}
	start := time.Now()
	rs := createAll(t, c, ctx, ps)
	took := time.Since(start)
	allOK(t, rs, fmt.Sprintf("%d prompts of %d tokens", n, tokens))
	minimum := time.Duration(max(float64(n)/(o.RPM/60), float64(n*tokens)/(o.ITPM/60)) * float64(time.Second))
	st := srv.KeyStats(testKey)
	what := fmt.Sprintf("%d prompts of %d tokens against %.0f RPM and %.0f ITPM (the API's bucket %v, latency %v)", n, tokens, cfg.RequestsPerMinute, cfg.InputTokensPerMinute, cfg.Burst, latency)
	if st.TooManyRequests() > 1 || st.Requests > int64(n)+1 {
		t.Fatalf("%s: the API saw %d attempts and answered %d of them 429; want at most 1 429\n"+
			"pace both limits yourself (bursts smaller than the API's), so the API never has to refuse you", what, st.Requests, st.TooManyRequests())
	}
	if limit := time.Duration(1.1*float64(minimum)) + latency; took > limit {
		t.Fatalf("%s took %v; want at most %v, 1.1 × the minimum of %v the limits allow, plus one reply's latency\n"+
			"the client is too slow: is MaxInFlight used, and are both buckets refilled at their full rate?", what, took, limit, minimum)
	}
}
