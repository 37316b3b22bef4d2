package sheddingsuite

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/fakegpu"
	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
	"ratelab/results"
)

// AdmitMatchesModel sends random sequences of requests, on random servers,
// and compares every answer with a small model of the server: the status,
// the instant it came, its Retry-After and body, every call to the limiter
// and the server's own counters at the end.
//
// The model must know the order of events at every instant, so the
// scenarios are built so that no two events that could race ever happen at
// the same nanosecond. Requests arrive on whole microseconds; Work is a
// whole number of microseconds plus 1 ns, so a slot frees m ns past a
// microsecond after m works in a row (m stays below 500); clients hang up
// 500 ns past a microsecond. An arrival therefore never meets a slot being
// freed or a client leaving. Deadlines may tie with a wait exactly: that
// comparison is deterministic, and "longer than Deadline" is what it tests.

// arrival is one request of a scenario.
type arrival struct {
	At       time.Duration // since the scenario started
	Client   string        // X-Client-Id, "" for none
	Remote   string        // the request's RemoteAddr
	Patience time.Duration // when the client hangs up, after At; 0: never
	Allow    bool          // the limiter's answer, in the bucket modes
	Wait     time.Duration // the limiter's wait when it refuses
}

// key is the client key the server gives a's request.
func (a arrival) key() string {
	if a.Client != "" {
		return a.Client
	}
	host, _, _ := net.SplitHostPort(a.Remote)
	return host
}

// scenario is a server and the requests sent to it.
type scenario struct {
	Cfg      fakegpu.Config
	Arrivals []arrival
}

func (sc scenario) String() string {
	var b strings.Builder
	c := sc.Cfg
	deadline := "off"
	if c.Deadline > 0 {
		deadline = c.Deadline.String()
	}
	fmt.Fprintf(&b, "server: mode %s, %d slot(s) of %v, MaxWaiting %d, Deadline %s; requests:\n",
		c.Mode, c.Slots, c.Work, c.MaxWaiting, deadline)
	for i, a := range sc.Arrivals {
		fmt.Fprintf(&b, "  #%d at %v, client %q", i, a.At, a.key())
		if a.Patience > 0 {
			fmt.Fprintf(&b, ", hangs up after %v", a.Patience)
		}
		if c.Mode.Limited() {
			if a.Allow {
				b.WriteString(", limiter allows")
			} else {
				fmt.Fprintf(&b, ", limiter refuses with wait %v", a.Wait)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// scenarioGen draws a server (mode, 1-3 slots, 1 ms to 3 s of work, a line of
// 1-8, a deadline or none) and up to 40 requests, close enough together to
// fill the line, from a few clients, some with little patience.
func scenarioGen() *rapid.Generator[scenario] {
	return rapid.Custom(func(t *rapid.T) scenario {
		cfg := fakegpu.DefaultConfig()
		cfg.Mode = rapid.SampledFrom([]fakegpu.Mode{fakegpu.ModeShed, fakegpu.ModeBucket, fakegpu.ModeRedis}).Draw(t, "mode")
		cfg.Slots = rapid.IntRange(1, 3).Draw(t, "slots")
		// Work of up to 3 s makes lines that drain in several seconds, so
		// a Retry-After from the wrong count shows.
		workUS := spread(t, 1000, 50000, "work µs")
		if rapid.IntRange(0, 1).Draw(t, "long work") == 1 {
			workUS = spread(t, 200_000, 3_000_000, "long work µs")
		}
		cfg.Work = time.Duration(workUS)*time.Microsecond + time.Nanosecond
		cfg.MaxWaiting = rapid.IntRange(1, 8).Draw(t, "max waiting")
		cfg.Deadline = 0
		names := rapid.SliceOfN(rapid.StringMatching(`[a-z0-9][a-z0-9._-]{0,11}`), 1, 5).Draw(t, "clients")
		names = append(names, "") // no X-Client-Id: keyed by address
		n := rapid.IntRange(1, 40).Draw(t, "requests")
		sc := scenario{Cfg: cfg}
		var at time.Duration
		maxGapUS := workUS/int64(cfg.Slots) + 1 // on average twice the capacity
		for i := range n {
			if i > 0 {
				gap := spread(t, 1, maxGapUS, "gap µs")
				if rapid.IntRange(0, 5).Draw(t, "pause") == 0 { // the line drains for a while
					gap = spread(t, workUS, 8*workUS, "pause µs")
				}
				at += time.Duration(gap) * time.Microsecond
			}
			a := arrival{At: at, Client: rapid.SampledFrom(names).Draw(t, "client"), Remote: remoteGen().Draw(t, "remote"), Allow: true}
			if rapid.IntRange(0, 2).Draw(t, "impatient") == 0 {
				a.Patience = time.Duration(spread(t, 1, 6*workUS, "patience µs"))*time.Microsecond + 500*time.Nanosecond
			}
			if cfg.Mode.Limited() && rapid.IntRange(0, 3).Draw(t, "refused") == 0 {
				a.Allow, a.Wait = false, limiterWaitGen().Draw(t, "wait")
			}
			sc.Arrivals = append(sc.Arrivals, a)
		}
		switch rapid.IntRange(0, 3).Draw(t, "deadline kind") {
		case 1, 3:
			longest := int64(cfg.MaxWaiting+1) * workUS / int64(cfg.Slots) // about the longest wait in line
			sc.Cfg.Deadline = time.Duration(spread(t, 1, longest, "deadline µs"))*time.Microsecond + 999
		case 2:
			// A deadline equal to some request's wait without one: a
			// request that waits exactly Deadline is still worked on.
			var waits []time.Duration
			for _, w := range simulate(sc).Waits {
				if w > 0 {
					waits = append(waits, w)
				}
			}
			if len(waits) > 0 {
				sc.Cfg.Deadline = rapid.SampledFrom(waits).Draw(t, "deadline = a wait")
			}
		}
		return sc
	})
}

// remoteGen draws a client address, IPv4 or IPv6, with a port.
func remoteGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		port := rapid.IntRange(1, 65535).Draw(t, "port")
		if rapid.IntRange(0, 3).Draw(t, "ipv6") == 0 {
			return fmt.Sprintf("[2001:db8::%x]:%d", rapid.IntRange(1, 0xffff).Draw(t, "host"), port)
		}
		return fmt.Sprintf("10.%d.%d.%d:%d", rapid.IntRange(0, 255).Draw(t, "b"), rapid.IntRange(0, 255).Draw(t, "c"),
			rapid.IntRange(1, 254).Draw(t, "d"), port)
	})
}

// limiterWaitGen draws the wait a limiter reports with a refusal: a
// fraction of a second, whole seconds or a nanosecond either side, any
// Duration at all (zero, negative, huge), or lab.InfDuration.
func limiterWaitGen() *rapid.Generator[time.Duration] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) time.Duration { return time.Duration(spread(t, 1, int64(time.Second), "ns")) }),
		rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.Int64Range(1, 100).Draw(t, "s"))*time.Second + time.Duration(rapid.Int64Range(-1, 1).Draw(t, "ns"))
		}),
		durationGen(),
		rapid.Just(lab.InfDuration),
	)
}

// outcome is what the model says one request gets.
type outcome struct {
	Status int
	At     time.Duration // when the answer comes, since the scenario started
	// RALo and RAHi bound the Retry-After in seconds; RALo 0 means none
	// is needed (the client has gone).
	RALo, RAHi int
	Why        string
}

// modelResult is the model's account of a scenario.
type modelResult struct {
	Out   []outcome
	Calls []int // the requests that ask the limiter, in order
	Stats results.ServerStats
	Waits []time.Duration // how long each request waited for its slot; -1 if it never got one
}

// simulate runs sc through the model of the server: the limiter first (in
// the bucket modes), then the bound on the line, then a free slot or a
// place in line, first come first served; at the front, the deadline, then
// the work. Clients that hang up leave the line.
func simulate(sc scenario) modelResult {
	cfg := sc.Cfg
	n := len(sc.Arrivals)
	res := modelResult{Out: make([]outcome, n), Waits: make([]time.Duration, n)}
	for i := range res.Waits {
		res.Waits[i] = -1
	}
	st := &res.Stats
	st.Received = int64(n)

	const (
		evFinish = iota
		evLeave
		evArrive
	)
	type event struct {
		at   time.Duration
		kind int
		i    int
	}
	var pending []event
	for i, a := range sc.Arrivals {
		pending = append(pending, event{a.At, evArrive, i})
	}
	free := cfg.Slots
	var line []int
	inLine := make([]bool, n)
	left := make([]bool, n)

	start := func(i int, now time.Duration) {
		res.Waits[i] = now - sc.Arrivals[i].At
		st.InFlight++
		pending = append(pending, event{now + cfg.Work, evFinish, i})
	}
	dispatch := func(now time.Duration) {
		var expired []int
		his := map[int]int{}
		for free > 0 && len(line) > 0 {
			j := line[0]
			line, inLine[j] = line[1:], false
			if waited := now - sc.Arrivals[j].At; cfg.Deadline > 0 && waited > cfg.Deadline {
				st.Expired++
				res.Waits[j] = waited
				expired = append(expired, j)
				his[j] = len(line)
				continue
			}
			free--
			start(j, now)
		}
		for _, j := range expired {
			lo, _ := drainRange(len(line), cfg)
			_, hi := drainRange(his[j], cfg)
			res.Out[j] = outcome{http.StatusServiceUnavailable, now, ceilSeconds(lo), ceilSeconds(hi),
				fmt.Sprintf("it reached the front after waiting %v, longer than Deadline %v: 503 at once, without the work, "+
					"with Retry-After from the drain time of the %d to %d still waiting", now-sc.Arrivals[j].At, cfg.Deadline, len(line), his[j])}
		}
	}

	for len(pending) > 0 {
		k := 0
		for e := range pending {
			p, q := pending[e], pending[k]
			if p.at < q.at || p.at == q.at && (p.kind < q.kind || p.kind == q.kind && p.i < q.i) {
				k = e
			}
		}
		ev := pending[k]
		pending = slices.Delete(pending, k, k+1)
		a := sc.Arrivals[ev.i]
		switch ev.kind {
		case evArrive:
			if cfg.Mode.Limited() {
				res.Calls = append(res.Calls, ev.i)
				if !a.Allow {
					st.Limited++
					o := outcome{Status: http.StatusTooManyRequests, At: ev.at, RALo: 1, RAHi: math.MaxInt,
						Why: "the limiter refused it with wait lab.InfDuration: 429 at once, with a Retry-After of at least 1"}
					if a.Wait != lab.InfDuration {
						o.RALo = ceilSeconds(a.Wait)
						o.RAHi = o.RALo
						o.Why = fmt.Sprintf("the limiter refused it with wait %v: 429 at once, with Retry-After %d (the wait in whole seconds, rounded up, at least 1)", a.Wait, o.RALo)
					}
					res.Out[ev.i] = o
					continue
				}
			}
			if w := len(line); w >= cfg.MaxWaiting {
				st.Shed++
				lo, hi := drainRange(w, cfg)
				res.Out[ev.i] = outcome{http.StatusServiceUnavailable, ev.at, ceilSeconds(lo), ceilSeconds(hi),
					fmt.Sprintf("%d already waited (MaxWaiting %d): 503 at once, before it joins the line, with Retry-After from DrainTime(%d) = %v",
						w, cfg.MaxWaiting, w, lo)}
				continue
			}
			if a.Patience > 0 {
				pending = append(pending, event{ev.at + a.Patience, evLeave, ev.i})
			}
			if free > 0 {
				free--
				start(ev.i, ev.at)
				continue
			}
			line, inLine[ev.i] = append(line, ev.i), true
			st.MaxWaiting = max(st.MaxWaiting, int64(len(line)))
		case evLeave:
			left[ev.i] = true
			if inLine[ev.i] {
				line = slices.DeleteFunc(line, func(j int) bool { return j == ev.i })
				inLine[ev.i] = false
				st.Shed++
				res.Out[ev.i] = outcome{Status: http.StatusServiceUnavailable, At: ev.at,
					Why: "its client hung up while it waited in line: it leaves the line at once (job.Acquire fails), 503"}
			}
		case evFinish:
			st.Finished++
			st.InFlight--
			if left[ev.i] {
				st.Dead++
			}
			res.Out[ev.i] = outcome{Status: http.StatusOK, At: ev.at,
				Why: fmt.Sprintf("it got a slot after waiting %v and was worked on: 200 when the work ends", res.Waits[ev.i])}
			free++
			dispatch(ev.at)
		}
	}
	return res
}

// indexLimiter is a fakegpu.Limiter that gives its i-th caller the i-th
// answer (allow when it runs out) and records every call.
type indexLimiter struct {
	answers []arrival
	start   time.Time

	mu    sync.Mutex
	calls []limiterCall
}

type limiterCall struct {
	key string
	n   float64
	at  time.Duration
}

func (l *indexLimiter) TryTake(key string, n float64) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.calls)
	l.calls = append(l.calls, limiterCall{key, n, time.Since(l.start)})
	if i < len(l.answers) && !l.answers[i].Allow {
		return false, l.answers[i].Wait
	}
	return true, 0
}

func testAdmitMatchesModel(t *testing.T, impl Impl) {
	suitekit.PropertyOf(t, scenarioGen(), func(t *testing.T, sc scenario) string {
		want := simulate(sc)
		var lim *indexLimiter
		var flim fakegpu.Limiter
		if sc.Cfg.Mode.Limited() {
			lim = &indexLimiter{answers: sc.Arrivals}
			flim = lim
		}
		r := newRig(t, impl, sc.Cfg, flim)
		start := time.Now()
		if lim != nil {
			lim.start = start
		}
		calls := make([]*call, len(sc.Arrivals))
		for i, a := range sc.Arrivals {
			time.Sleep(time.Until(start.Add(a.At)))
			calls[i] = r.sendAs(fmt.Sprintf("#%d", i), a)
		}
		time.Sleep(time.Hour)
		r.mu.Lock()
		msg := r.panicMsg
		r.mu.Unlock()
		if msg != "" {
			return msg
		}
		fail := func(format string, args ...any) string {
			return fmt.Sprintf(format, args...) + "\n" + sc.String()
		}
		for i, c := range calls {
			w := want.Out[i]
			if !c.done() {
				return fail("request #%d is still unanswered an hour after it arrived; want %d at %v: %s", i, w.Status, w.At, w.Why)
			}
			resp := c.rec.Result()
			at := c.answered.Sub(start)
			if resp.StatusCode != w.Status || at != w.At {
				return fail("request #%d: %d at %v; want %d at %v: %s", i, resp.StatusCode, at, w.Status, w.At, w.Why)
			}
			if w.Status == http.StatusOK {
				if body := c.rec.Body.String(); body != okBody {
					return fail("request #%d: 200 with body %q; want %q (answer with fakegpu.WriteOK)", i, body, okBody)
				}
				continue
			}
			if problem := refusalFormat(resp, c.rec.Body.String()); problem != "" {
				return fail("request #%d, %d: %s", i, resp.StatusCode, problem)
			}
			if w.RALo == 0 {
				continue
			}
			got, err := retryAfter(resp)
			switch {
			case err != nil:
				return fail("request #%d, %d at %v: %v; want a Retry-After (%s)", i, resp.StatusCode, at, err, w.Why)
			case got < w.RALo || got > w.RAHi:
				wantRA := fmt.Sprint(w.RALo)
				if w.RAHi == math.MaxInt {
					wantRA = fmt.Sprintf("at least %d", w.RALo)
				} else if w.RAHi != w.RALo {
					wantRA = fmt.Sprintf("%d to %d", w.RALo, w.RAHi)
				}
				return fail("request #%d, %d at %v: Retry-After %d; want %s (%s)", i, resp.StatusCode, at, got, wantRA, w.Why)
			}
		}
		if lim != nil {
			lim.mu.Lock()
			got := slices.Clone(lim.calls)
			lim.mu.Unlock()
			for k, i := range want.Calls {
				a := sc.Arrivals[i]
				if k >= len(got) {
					return fail("the limiter was asked %d times; want once per request (%d), as it arrives", len(got), len(want.Calls))
				}
				if g := got[k]; g.key != a.key() || g.n != 1 || g.at != a.At {
					return fail("TryTake call %d: TryTake(%q, %v) at %v; want TryTake(%q, 1) at %v, for request #%d as it arrives "+
						"(one token per request, keyed by job.ClientKey(), before anything else)", k, g.key, g.n, g.at, a.key(), a.At, i)
				}
			}
			if len(got) > len(want.Calls) {
				return fail("the limiter was asked %d times; want once per request (%d), as it arrives", len(got), len(want.Calls))
			}
		}
		got := r.srv.Stats()
		got.FailOpen = 0
		got.Refusals = nil // the server's own judgement of each Retry-After, read by the floods
		if got != want.Stats {
			return fail("Stats() = %+v; want %+v", got, want.Stats)
		}
		return ""
	})
}

// refusalFormat checks that a refusal is one short line of plain text, as
// http.Error writes it, and says what is wrong with it if not.
func refusalFormat(resp *http.Response, body string) string {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return fmt.Sprintf("Content-Type %q; want text/plain (a refusal is one line of plain text, as http.Error writes it)", ct)
	}
	if len(body) < 2 || len(body) > 512 || strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
		return fmt.Sprintf("body %q; want one short line of text ending in a newline, as http.Error writes it", body)
	}
	return ""
}

// sendAs starts a's GET /generate on its own goroutine, like send, from a's
// address and with a's X-Client-Id and patience.
func (r *rig) sendAs(name string, a arrival) *call {
	ctx, cancel := context.WithCancel(r.t.Context())
	if a.Patience > 0 {
		ctx, cancel = context.WithTimeout(r.t.Context(), a.Patience)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/generate", nil)
	req.RemoteAddr = a.Remote
	req.Host = "gpu.internal:8000"
	if a.Client != "" {
		req.Header.Set("X-Client-Id", a.Client)
	}
	c := &call{name: name, rec: httptest.NewRecorder(), sent: time.Now(), finished: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		defer close(c.finished)
		defer func() { c.answered = time.Now() }()
		r.srv.ServeHTTP(c.rec, req)
	}()
	return c
}
