package llmclientsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/provider"
)

// newClient makes a client under test, or returns its panic.
func (s *suite) newClientOf(o Options) (Client, string) {
	var c Client
	if r := suitekit.Report("NewPoliteClient(opts)", func() { c = s.newClient(o) }); r != "" {
		return nil, r
	}
	if c == nil {
		return nil, "NewPoliteClient(opts) = nil; want a client"
	}
	return c, ""
}

// --- MaxInFlight ---

// inFlightRandom runs more calls than slots (MaxInFlight at random, zero
// or less meaning 8), each answered after a random latency: the API must
// see exactly MaxInFlight at once at the busiest, never more, and with
// equal latencies the calls must finish as soon as full slots allow.
func (s *suite) inFlightRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		m := rapid.OneOf(rapid.IntRange(1, 16), rapid.SampledFrom([]int{0, -1})).Draw(rt, "MaxInFlight")
		slots := m
		if slots <= 0 {
			slots = defaultMaxInFlight
		}
		n := slots + rapid.IntRange(1, 2*slots).Draw(rt, "calls beyond the slots")
		equal := rapid.Bool().Draw(rt, "equal latencies")
		lat := make([]time.Duration, n)
		for i := range lat {
			lat[i] = time.Duration(rapid.Int64Range(int64(10*time.Millisecond), int64(3*time.Second)).Draw(rt, "latency"))
			if equal && i > 0 {
				lat[i] = lat[0]
			}
		}
		var mu sync.Mutex
		index := map[string]int{}
		for i := range n {
			index[lastText(prompt(i, 20))] = i
		}
		a := newAPI(func(_ int, p provider.MessageParams) reply {
			mu.Lock()
			defer mu.Unlock()
			return reply{delay: lat[index[lastText(p)]]}
		})
		o := baseOptions(a)
		o.MaxInFlight = m
		c, failure := s.newClientOf(o)
		if failure != "" {
			return failure
		}
		ps := make([]provider.MessageParams, n)
		for i := range ps {
			ps[i] = prompt(i, 20)
		}
		start := time.Now()
		if failure := runAll(c, ps); failure != "" {
			return failure
		}
		took := time.Since(start)
		a.mu.Lock()
		most := a.maxInFlight
		a.mu.Unlock()
		if most != slots {
			return fmt.Sprintf("%d calls at once with MaxInFlight=%d (%d slots), answered after %v: at most %d were in flight together; want exactly %d\n"+
				"a semaphore of MaxInFlight slots, held from just before the attempt is sent until its answer is in, and every slot kept busy",
				n, m, slots, lat[:min(n, 5)], most, slots)
		}
		if equal {
			if want := time.Duration((n+slots-1)/slots) * lat[0]; took > want+late {
				return fmt.Sprintf("%d calls of %v each with %d slots finished at t=%v; want t=%v: keep every slot busy", n, lat[0], slots, took, want)
			}
		}
		return ""
	})
}

// runAll calls Create for every prompt at once and waits for them all.
func runAll(c Client, ps []provider.MessageParams) string {
	ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
	defer cancel()
	var (
		p  panics
		wg sync.WaitGroup
	)
	for i, pp := range ps {
		wg.Go(func() {
			var err error
			p.add(suitekit.Report(fmt.Sprintf("Create(ctx, prompt %d)", i), func() { _, err = c.Create(ctx, pp) }))
			if err != nil {
				p.add(fmt.Sprintf("Create of prompt %d = %v; want a message", i, err))
			}
		})
	}
	wg.Wait()
	return p.first
}

// noSlotBetweenAttempts: the first calls are told to come back much later;
// while they wait, they hold no slot, so every other call goes through.
func (s *suite) noSlotBetweenAttempts(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		slots := rapid.IntRange(1, 4).Draw(rt, "MaxInFlight")
		others := rapid.IntRange(1, 20).Draw(rt, "other calls")
		ra := rapid.IntRange(10, 50).Draw(rt, "retry-after seconds")
		lat := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(200*time.Millisecond)).Draw(rt, "latency"))
		var mu sync.Mutex
		told := map[string]bool{}
		a := newAPI(func(_ int, p provider.MessageParams) reply {
			mu.Lock()
			defer mu.Unlock()
			key := lastText(p)
			if strings.HasPrefix(key, "judgment 9999") && !told[key] {
				told[key] = true
				return reply{status: 429, errType: provider.ErrorRateLimit, retryAfter: strconv.Itoa(ra)}
			}
			return reply{delay: lat}
		})
		o := baseOptions(a)
		o.MaxInFlight = slots
		c, failure := s.newClientOf(o)
		if failure != "" {
			return failure
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
		defer cancel()
		var wg sync.WaitGroup
		var p panics
		// The first calls take every slot, and are told to come back later.
		for i := range slots {
			wg.Go(func() {
				p.add(suitekit.Report("Create(ctx, params)", func() { _, _ = c.Create(ctx, prompt(99990+i, 20)) }))
			})
		}
		time.Sleep(time.Millisecond)
		ps := make([]provider.MessageParams, others)
		for i := range ps {
			ps[i] = prompt(i, 20)
		}
		failure = runAll(c, ps)
		done := time.Since(a.start)
		wg.Wait()
		if failure == "" {
			failure = p.first
		}
		if failure != "" {
			return failure
		}
		if limit := time.Duration(ra) * time.Second; done >= limit {
			return fmt.Sprintf("with MaxInFlight=%d, %d calls were told retry-after %d s; %d other calls of %v each then finished at t=%v; want long before t=%v\n"+
				"between attempts a call holds no slot: give the slot back when the answer is in, and take one again for the next attempt",
				slots, slots, ra, others, lat, done, limit)
		}
		return ""
	})
}

// --- Headers that say a limit is nearly spent ---

// holdModel is the model of the pause an answer's rate-limit headers ask
// for at now, for a request of estimate input tokens: for each limit that
// holds less than the request needs (1 request; estimate input tokens),
// until the API will have refilled what is missing at limit/60 a second,
// or until its reset if that is sooner; the latest of those, at most
// MaxHold.
func holdModel(h http.Header, estimate int, now time.Time) time.Duration {
	rl := provider.ParseRateLimits(h)
	var hold time.Duration
	for _, x := range []struct {
		l    provider.RateLimit
		need float64
	}{{rl.Requests, 1}, {rl.InputTokens, float64(estimate)}} {
		short := x.need - float64(x.l.Remaining)
		if !x.l.Known || short <= 0 || x.l.Limit <= 0 {
			continue
		}
		d := time.Duration(math.Ceil(short / (float64(x.l.Limit) / 60) * 1e9))
		if !x.l.Reset.IsZero() && x.l.Reset.Sub(now) < d {
			d = x.l.Reset.Sub(now)
		}
		hold = max(hold, d)
	}
	return min(hold, maxHold)
}

// limitSpec is one limit's headers in an answer, drawn before the call:
// its limit and remaining, and its reset (none, unreadable, or an offset
// from the answer's time).
type limitSpec struct {
	present          bool
	limit, remaining int64
	reset            int // 0 none, 1 unreadable, 2 at the offset
	resetIn          time.Duration
}

// drawLimit draws one limit's headers: often absent; plenty left, nearly
// spent or overspent; limits small and huge; resets near, far, past,
// missing or unreadable.
func drawLimit(rt *rapid.T, label string, need int) limitSpec {
	if rapid.IntRange(0, 4).Draw(rt, label+" present") == 0 {
		return limitSpec{}
	}
	l := limitSpec{present: true}
	l.limit = rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(100, 1_000_000), rapid.Int64Range(1_000_000, math.MaxInt32)).Draw(rt, label+" limit")
	switch rapid.IntRange(0, 2).Draw(rt, label+" remaining kind") {
	case 0:
		l.remaining = int64(need) + rapid.Int64Range(0, l.limit).Draw(rt, label+" plenty")
	case 1:
		l.remaining = rapid.Int64Range(0, int64(need)).Draw(rt, label+" short")
	default:
		l.remaining = -rapid.Int64Range(0, l.limit).Draw(rt, label+" overspent")
	}
	switch rapid.IntRange(0, 4).Draw(rt, label+" reset kind") {
	case 0:
	case 1:
		l.reset = 1
	case 2:
		l.reset, l.resetIn = 2, -time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, label+" reset ago"))
	default:
		l.reset, l.resetIn = 2, time.Duration(rapid.Int64Range(0, int64(3*time.Hour)).Draw(rt, label+" reset in"))
	}
	return l
}

// set writes l's headers as an answer sent at now carries them.
func (l limitSpec) set(h map[string]string, now time.Time, limitH, remainingH, resetH string) {
	if !l.present {
		return
	}
	h[limitH] = strconv.FormatInt(l.limit, 10)
	h[remainingH] = strconv.FormatInt(l.remaining, 10)
	switch l.reset {
	case 1:
		h[resetH] = "soon"
	case 2:
		h[resetH] = now.Add(l.resetIn).UTC().Format(time.RFC3339Nano)
	}
}

// holdsRandom sends calls one after another, each answered with random
// rate-limit headers, and checks when the next one goes out against the
// model of the hold. The client has no limits of its own.
func (s *suite) holdsRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		n := rapid.IntRange(2, 6).Draw(rt, "calls")
		tokens := make([]int, n)
		reqs, ins := make([]limitSpec, n), make([]limitSpec, n)
		for i := range tokens {
			tokens[i] = rapid.IntRange(20, 5000).Draw(rt, "prompt tokens")
			reqs[i] = drawLimit(rt, fmt.Sprintf("answer %d requests", i), 1)
			ins[i] = drawLimit(rt, fmt.Sprintf("answer %d input tokens", i), tokens[i])
		}
		var mu sync.Mutex
		sent := make([]http.Header, n)
		a := newAPI(func(i int, _ provider.MessageParams) reply {
			i = min(i, n-1)
			h := map[string]string{}
			now := time.Now()
			reqs[i].set(h, now, provider.HeaderRequestsLimit, provider.HeaderRequestsRemaining, provider.HeaderRequestsReset)
			ins[i].set(h, now, provider.HeaderInputTokensLimit, provider.HeaderInputTokensRemaining, provider.HeaderInputTokensReset)
			hh := http.Header{}
			for k, v := range h {
				hh.Set(k, v)
			}
			mu.Lock()
			sent[i] = hh
			mu.Unlock()
			return reply{header: h}
		})
		c, failure := s.newClientOf(baseOptions(a))
		if failure != "" {
			return failure
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
		defer cancel()
		var want time.Duration
		for i := range n {
			calledAt := time.Since(a.start)
			var err error
			if r := suitekit.Report("Create(ctx, params)", func() { _, err = c.Create(ctx, prompt(i, tokens[i])) }); r != "" {
				return r
			}
			calls := a.snapshot()
			if err != nil || len(calls) != i+1 {
				return fmt.Sprintf("call %d: Create = %v after %d attempts in all; want a message, one attempt per call", i, err, len(calls))
			}
			if got := calls[i].at - calledAt; got < want-early || got > want+late {
				said := "no rate-limit headers"
				if i > 0 {
					var hs []string
					for k, v := range sent[i-1] {
						hs = append(hs, k+": "+v[0])
					}
					slices.Sort(hs)
					said = strings.Join(hs, "\n  ")
				}
				return fmt.Sprintf("call %d (of %d input tokens) went out %v after it was called; want %v\n"+
					"the previous answer, to a request of %d input tokens, said:\n  %s\n"+
					"if a limit holds less than the request needs (1 request, or its input tokens), wait until the API has refilled what is missing at limit/60 a second, "+
					"or until the reset if that is sooner, at most MaxHold = %v; with enough left, do not wait",
					i, tokens[i], got, want, tokens[max(i-1, 0)], said, maxHold)
			}
			mu.Lock()
			want = holdModel(sent[i], tokens[i], calls[i].when)
			mu.Unlock()
		}
		return ""
	})
}

// --- The request on the wire ---

// sendsRandomRequests sends random params (model, max_tokens, system
// blocks with and without cache_control, several messages) with a random
// key to a random base URL: every attempt must be a POST of exactly the
// params as JSON to BaseURL + /v1/messages, with the key and version.
func (s *suite) sendsRandomRequests(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		p := provider.MessageParams{
			Model:     rapid.StringMatching(`claude-[a-z0-9-]{1,20}`).Draw(rt, "model"),
			MaxTokens: rapid.IntRange(1, 4096).Draw(rt, "max_tokens"),
		}
		for range rapid.IntRange(0, 2).Draw(rt, "system blocks") {
			b := provider.Text(rapid.StringMatching(`[ -~]{1,200}`).Draw(rt, "system text"))
			if rapid.Bool().Draw(rt, "cache_control") {
				b.CacheControl = provider.Ephemeral()
			}
			p.System = append(p.System, b)
		}
		for i := range rapid.IntRange(1, 4).Draw(rt, "messages") {
			role := []string{"user", "assistant"}[i%2]
			p.Messages = append(p.Messages, provider.MessageParam{Role: role, Content: provider.Blocks{provider.Text(rapid.StringMatching(`[ -~]{1,300}`).Draw(rt, "text"))}})
		}
		key := rapid.StringMatching(`sk-ant-[A-Za-z0-9]{4,30}`).Draw(rt, "key")
		base := "http://" + rapid.StringMatching(`[a-z]{1,10}\.test`).Draw(rt, "host") + rapid.StringMatching(`(/[a-z]{1,6}){0,2}`).Draw(rt, "path")
		failures := rapid.IntRange(0, 2).Draw(rt, "529s first")
		a := newAPI(func(n int, _ provider.MessageParams) reply {
			if n < failures {
				return reply{status: provider.StatusOverloaded, errType: provider.ErrorOverloaded}
			}
			return reply{}
		})
		o := baseOptions(a)
		o.BaseURL, o.APIKey = base, key
		c, failure := s.newClientOf(o)
		if failure != "" {
			return failure
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
		defer cancel()
		var (
			msg *provider.Message
			err error
		)
		if r := suitekit.Report("Create(ctx, params)", func() { msg, err = c.Create(ctx, p) }); r != "" {
			return r
		}
		calls := a.snapshot()
		if err != nil || msg == nil || len(calls) != failures+1 {
			return fmt.Sprintf("Create = (%v, %v) after %d attempts; want the message after %d", msg, err, len(calls), failures+1)
		}
		if want := fmt.Sprintf("judged %d", failures); msg.Text() != want || msg.Usage.InputTokens != provider.CountTokens(p) {
			return fmt.Sprintf("Create returned %+v; want the message the API sent (%q, %d input tokens)", msg, want, provider.CountTokens(p))
		}
		want, _ := json.Marshal(p)
		for i, got := range calls {
			var bad []string
			if got.method != http.MethodPost || got.url != base+"/v1/messages" {
				bad = append(bad, fmt.Sprintf("%s %s (want POST %s/v1/messages)", got.method, got.url, base))
			}
			if k := got.header.Get(provider.HeaderAPIKey); k != key {
				bad = append(bad, fmt.Sprintf("x-api-key %q (want Options.APIKey, %q)", k, key))
			}
			if v := got.header.Get("anthropic-version"); v != apiVersion {
				bad = append(bad, fmt.Sprintf("anthropic-version %q (want APIVersion, %q)", v, apiVersion))
			}
			if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				bad = append(bad, fmt.Sprintf("Content-Type %q (want application/json)", ct))
			}
			have, _ := json.Marshal(got.params)
			if !bytes.Equal(want, have) {
				bad = append(bad, fmt.Sprintf("the body %s (want the params as JSON: %s)", got.raw, want))
			}
			if len(bad) > 0 {
				return fmt.Sprintf("attempt %d of %d: %s", i+1, len(calls), strings.Join(bad, "; "))
			}
		}
		return ""
	})
}

// --- ctx ---

// contextEndsRandom ends ctx at a random instant while the client waits:
// in a backoff before a retry, in a hold the headers asked for, on its
// request bucket, or during an attempt that gets no answer. Create must
// return at that instant with an error wrapping ctx.Err(), after only
// the attempts it had sent.
func (s *suite) contextEndsRandom(t *testing.T) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string {
		where := rapid.SampledFrom([]string{"backoff", "hold", "bucket", "attempt"}).Draw(rt, "waiting in")
		long := time.Duration(rapid.Int64Range(int64(2*time.Second), int64(50*time.Second)).Draw(rt, "the wait"))
		a := newAPI(func(n int, _ provider.MessageParams) reply {
			switch {
			case where == "backoff" && n == 0:
				return reply{status: 429, errType: provider.ErrorRateLimit, retryAfter: strconv.Itoa(int(long/time.Second) + 1)}
			case where == "hold":
				return reply{header: map[string]string{provider.HeaderRequestsLimit: "1", provider.HeaderRequestsRemaining: "0"}}
			case where == "attempt" && n == 1:
				return reply{hang: true}
			}
			return reply{}
		})
		o := baseOptions(a)
		o.AttemptTimeout = time.Hour
		if where == "bucket" {
			o.RPM = 60 / long.Seconds() // one request per long wait
		}
		c, failure := s.newClientOf(o)
		if failure != "" {
			return failure
		}
		first := 0
		if where != "backoff" {
			// A first call that goes through, so the second waits.
			var err error
			if r := suitekit.Report("Create(ctx, params)", func() { _, err = c.Create(context.Background(), prompt(0, 20)) }); r != "" {
				return r
			}
			if err != nil {
				return fmt.Sprintf("the first call: Create = %v; want a message", err)
			}
			first = 1
		}
		end := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(long)-int64(time.Millisecond)).Draw(rt, "ctx ends after"))
		cancelIt := rapid.Bool().Draw(rt, "cancel rather than a deadline")
		ctx, stop := context.WithTimeout(context.Background(), end)
		cause := context.DeadlineExceeded
		if cancelIt {
			var c context.CancelFunc
			ctx, c = context.WithCancel(context.Background())
			timer := time.AfterFunc(end, c)
			stop = func() { timer.Stop(); c() }
			cause = context.Canceled
		}
		defer stop()
		start := time.Now()
		var (
			msg *provider.Message
			err error
		)
		if r := suitekit.Report("Create(ctx, params)", func() { msg, err = c.Create(ctx, prompt(1, 20)) }); r != "" {
			return r
		}
		took := time.Since(start)
		calls := a.snapshot()
		wantCalls := first + 1
		if where == "hold" || where == "bucket" {
			wantCalls = first
		}
		if msg != nil || !errors.Is(err, cause) || took < end-early || took > end+late || len(calls) != wantCalls {
			return fmt.Sprintf("waiting in %s (%v long), with ctx ending after %v: Create = (%v, %v) after %v and %d attempts in all; "+
				"want an error wrapping %v at %v, after %d attempts\nevery wait, before a retry, in a hold, on a bucket or for an answer, ends when ctx does",
				where, long, end, msg, err, took, len(calls), cause, end, wantCalls)
		}
		var apiErr *provider.APIError
		if where == "backoff" && (!errors.As(err, &apiErr) || apiErr.StatusCode != 429) {
			return fmt.Sprintf("ctx ended while Create waited to retry a 429: the error %q does not wrap the 429's *provider.APIError; "+
				"want it to wrap ctx.Err() and the last attempt's error", err)
		}
		return ""
	})
}

// --- Jitter ---

// jitterIsUniform fails 300 calls at once with 529 and compares their
// retries, which come after the first backoff alone, with the uniform
// distribution on [0, BaseBackoff] by a Kolmogorov–Smirnov test whose
// threshold gives a correct client a chance of failing of 1 in 10^9.
func (s *suite) jitterIsUniform(t *testing.T) {
	const calls, alpha = 300, 1e-9
	r := suitekit.Rand(t)
	base := time.Duration(float64(time.Millisecond) * math.Pow(10, 4*r.Float64()))
	var mu sync.Mutex
	tries := map[string]int{}
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
	o.MaxInFlight = calls
	o.BaseBackoff, o.MaxBackoff = base, base*time.Duration(1+r.IntN(8))
	c := s.client(t, o)
	ps := make([]provider.MessageParams, calls)
	for i := range ps {
		ps[i] = prompt(i, 20)
	}
	if failure := runAll(c, ps); failure != "" {
		t.Fatal(failure)
	}
	all := a.snapshot()
	xs := make([]float64, 0, calls)
	for _, p := range ps {
		cs := attemptsOf(all, p)
		if len(cs) != 2 {
			t.Fatalf("a call answered 529 once, then 200, made %d attempts; want 2", len(cs))
		}
		if d := cs[1].at - cs[0].at; d < 0 || d > base {
			t.Fatalf("a retry after a 529 came %v after the first attempt; want a value in [0, BaseBackoff = %v]", d, base)
		}
		xs = append(xs, float64(cs[1].at-cs[0].at)/float64(base))
	}
	if d, crit := suitekit.KSUniform(xs, alpha); d > crit+1/float64(base) {
		t.Fatalf("%d calls answered 529 at once retried after waits that are not uniform on [0, BaseBackoff = %v]: "+
			"the largest distance between their distribution and the uniform one is %.3f; a uniform draw exceeds %.3f with a chance of 1 in 10^9\n"+
			"full jitter: before retry k wait a uniformly random time in [0, min(MaxBackoff, BaseBackoff×2^k)], fresh for every call",
			calls, base, d, crit)
	}
}
