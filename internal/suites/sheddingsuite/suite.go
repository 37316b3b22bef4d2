// Package sheddingsuite is task 2's test suite, shared by the exercise and
// the reference solution: both call Run with their own functions, so the
// learner is held to exactly the checks the reference passes. Learners do not
// edit it.
//
// Each check is a named subtest of Run, so the grader can map a failure back
// to a check:
//
//	RetryAfterSeconds     rounding up, the floor of 1, no overflow (random waits too)
//	DrainTime             waiting requests / capacity, exact (random lines and servers too)
//	Serve200              an idle server does the work and answers 200
//	BucketAllowed         bucket mode asks the client's bucket for 1 token, then serves
//	Limited429            a client over its limit gets 429 + Retry-After, no slot
//	LimitBeforeShed       in bucket mode 429 takes precedence over 503
//	ShedModeSkipsLimiter  shed mode never consults a limiter
//	ShedWhenLineFull      a full line means 503 at once, Retry-After from the drain time
//	ShedBeforeSlot        shed requests never take a slot (Shed, not Expired)
//	DeadlineExpiry        a request that waited past Deadline gets 503, no work, slot released
//	DeadlineZeroIsOff     Deadline 0 never expires anything
//	ClientLeavesLine      a client that gives up leaves the line
//	LineBound             the line never grows past MaxWaiting under a burst
//	SlotAlwaysReleased    10,000 mixed requests leave no slot held; every refusal has its Retry-After
//	AdmitMatchesModel     random requests on random servers, every answer as a model of the server says
//	RealClock             the main promises again on the real clock, over HTTP
//	NoGoroutineLeak       nothing is left running afterwards
//
// Every call into the code under test is guarded: a panic, such as a stub's
// "task 2: Admit is not implemented yet", fails only the subtest it happened
// in, with the panic value as the message, and the other subtests still run.
//
// The pure functions and RealClock run on the real clock. Every other check
// runs inside a testing/synctest bubble that starts at a random instant: the
// server is created in the bubble and driven through ServeHTTP from
// goroutines, so the 100 ms of Work, client timeouts and deadlines all pass
// in fake time, instantly and deterministically. Requests of a burst arrive a microsecond apart rather
// than at the same instant: fakegpu's Job offers Waiting() and Acquire() as
// two calls, so two requests deciding at the very same moment could both see
// room for one more and overshoot MaxWaiting by one. A microsecond apart, each
// decision sees the line exactly as the previous ones left it.
package sheddingsuite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"ratelab/fakegpu"
	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// Impl is the code under test: task 2's three functions.
type Impl struct {
	// Admit is the admission logic of /generate in the protected modes.
	Admit func(w http.ResponseWriter, r *http.Request, job *fakegpu.Job)
	// RetryAfterSeconds turns a wait into a Retry-After value in seconds.
	RetryAfterSeconds func(d time.Duration) int
	// DrainTime says how long the line takes to clear.
	DrainTime func(waiting int, cfg fakegpu.Config) time.Duration
}

// Run runs every check of task 2 against impl, each as a named subtest.
func Run(t *testing.T, impl Impl) {
	if impl.Admit == nil || impl.RetryAfterSeconds == nil || impl.DrainTime == nil {
		t.Fatalf("sheddingsuite.Run: Impl has a nil function (%+v); want all three set", impl)
	}
	t.Run("RetryAfterSeconds", func(t *testing.T) { testRetryAfterSeconds(t, impl) })
	t.Run("DrainTime", func(t *testing.T) { testDrainTime(t, impl) })
	t.Run("Serve200", func(t *testing.T) { testServe200(t, impl) })
	t.Run("BucketAllowed", func(t *testing.T) { testBucketAllowed(t, impl) })
	t.Run("Limited429", func(t *testing.T) { testLimited429(t, impl) })
	t.Run("LimitBeforeShed", func(t *testing.T) { testLimitBeforeShed(t, impl) })
	t.Run("ShedModeSkipsLimiter", func(t *testing.T) { testShedModeSkipsLimiter(t, impl) })
	t.Run("ShedWhenLineFull", func(t *testing.T) { testShedWhenLineFull(t, impl) })
	t.Run("ShedBeforeSlot", func(t *testing.T) { testShedBeforeSlot(t, impl) })
	t.Run("DeadlineExpiry", func(t *testing.T) { testDeadlineExpiry(t, impl) })
	t.Run("DeadlineZeroIsOff", func(t *testing.T) { testDeadlineZeroIsOff(t, impl) })
	t.Run("ClientLeavesLine", func(t *testing.T) { testClientLeavesLine(t, impl) })
	t.Run("LineBound", func(t *testing.T) { testLineBound(t, impl) })
	t.Run("SlotAlwaysReleased", func(t *testing.T) { testSlotAlwaysReleased(t, impl) })
	t.Run("AdmitMatchesModel", func(t *testing.T) { testAdmitMatchesModel(t, impl) })
	t.Run("RealClock", func(t *testing.T) { testRealClock(t, impl) })
	t.Run("NoGoroutineLeak", func(t *testing.T) { testNoGoroutineLeak(t, impl) })
}

// okBody is what fakegpu.WriteOK sends.
const okBody = `{"text":"hello"}` + "\n"

// ---------------------------------------------------------------------------
// Status codes and headers.

func testServe200(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeShed, 2, 100*time.Millisecond, 4, 800*time.Millisecond)
		r := newRig(t, impl, cfg, nil)
		c := r.send("the only request", "alice", 0)
		r.sleep(time.Minute)
		resp := r.answer(c)
		body := r.body(c)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status on an idle server = %d (body %q); want 200", resp.StatusCode, body)
		}
		if body != okBody {
			t.Errorf("body = %q; want %q (answer with fakegpu.WriteOK)", body, okBody)
		}
		if got := resp.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q; want %q (answer with fakegpu.WriteOK)", got, "application/json")
		}
		if got := c.took(); got != cfg.Work {
			t.Errorf("answered after %v; want %v (one Work, no waiting on an idle server)", got, cfg.Work)
		}
		st := r.srv.Stats()
		wantStat(t, "Finished", st.Finished, 1, "the work must be done once, with job.Work")
		wantStat(t, "InFlight", st.InFlight, 0, "release the slot after the work")
		wantStat(t, "Leaked", st.Leaked, 0, "release the slot after the work")
		wantStat(t, "Shed", st.Shed, 0, "")
		wantStat(t, "Expired", st.Expired, 0, "")
	})
}

func testBucketAllowed(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeBucket, 2, 100*time.Millisecond, 4, 800*time.Millisecond)
		lim := &scriptedLimiter{}
		r := newRig(t, impl, cfg, lim)
		alice := r.send("alice's request", "alice", 0)
		r.sleep(time.Microsecond)
		anon := r.send("a request without X-Client-Id", "", 0)
		r.sleep(time.Minute)
		for _, c := range []*call{alice, anon} {
			if resp := r.answer(c); resp.StatusCode != http.StatusOK {
				t.Errorf("%s, allowed by the limiter: status = %d (body %q); want 200", c.name, resp.StatusCode, r.body(c))
			}
		}
		want := []take{{"alice", 1}, {"192.0.2.1", 1}} // httptest's RemoteAddr is 192.0.2.1:1234
		if got := lim.calls(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("TryTake calls = %v; want %v (one token per request, keyed by job.ClientKey())", got, want)
		}
		st := r.srv.Stats()
		wantStat(t, "Finished", st.Finished, 2, "")
		wantStat(t, "Limited", st.Limited, 0, "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
	})
}

func testLimited429(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeBucket, 2, 100*time.Millisecond, 4, 800*time.Millisecond)
		waits := map[string]time.Duration{
			"slow":  2500 * time.Millisecond,
			"quick": 300 * time.Millisecond,
			"exact": 2 * time.Second,
			"never": lab.InfDuration,
		}
		lim := &scriptedLimiter{answer: func(key string) (bool, time.Duration) { return false, waits[key] }}
		r := newRig(t, impl, cfg, lim)
		clients := []string{"slow", "quick", "exact", "never"}
		calls := make([]*call, len(clients))
		for i, key := range clients {
			calls[i] = r.send(key+"'s request", key, 0)
			r.sleep(time.Microsecond)
		}
		r.sleep(time.Minute)
		for i, key := range clients {
			c := calls[i]
			resp := r.answer(c)
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("%s, refused by the limiter with wait %v: status = %d (body %q); want 429",
					c.name, waits[key], resp.StatusCode, r.body(c))
				continue
			}
			if c.took() != 0 {
				t.Errorf("%s: 429 after %v; want it at once", c.name, c.took())
			}
			got, err := retryAfter(resp)
			switch {
			case err != nil:
				t.Errorf("%s: %v; want the limiter's wait in whole seconds", c.name, err)
			case key == "never":
				if got < 1 {
					t.Errorf("%s: limiter wait lab.InfDuration gave Retry-After %d; want at least 1", c.name, got)
				}
			default:
				if want := ceilSeconds(waits[key]); got != want {
					t.Errorf("%s: Retry-After = %d; want %d (the limiter's wait %v, rounded up, at least 1)",
						c.name, got, want, waits[key])
				}
			}
		}
		st := r.srv.Stats()
		wantStat(t, "Limited", st.Limited, int64(len(clients)), "")
		wantStat(t, "MaxWaiting", st.MaxWaiting, 0, "a limited request must not join the line")
		wantStat(t, "Finished", st.Finished, 0, "a limited request must not be worked on")
		wantStat(t, "Shed", st.Shed, 0, "")
		wantStat(t, "Expired", st.Expired, 0, "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
	})
}

func testLimitBeforeShed(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeBucket, 1, time.Second, 1, 0)
		lim := &scriptedLimiter{answer: func(key string) (bool, time.Duration) {
			if key == "mallory" {
				return false, 1500 * time.Millisecond
			}
			return true, 0
		}}
		r := newRig(t, impl, cfg, lim)
		r.send("alice's 1st request", "alice", 0) // takes the slot
		r.settle()
		r.send("alice's 2nd request", "alice", 0) // fills the line
		r.settle()
		if got := r.srv.Stats().Waiting; got != 1 {
			t.Fatalf("Stats().Waiting = %d after 2 requests on 1 slot with MaxWaiting 1; want 1", got)
		}
		mallory := r.send("mallory's request", "mallory", 0)
		r.settle()
		bob := r.send("bob's request", "bob", 0)
		r.settle()
		if resp := r.answer(mallory); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s, over its limit while the line is full: status = %d; want 429 (check the client's bucket before the line)",
				mallory.name, resp.StatusCode)
		}
		if !bob.done() {
			t.Fatalf("%s, within its limit, arrived with the line full (1 waiting, MaxWaiting 1) and is still waiting; want 503 at once",
				bob.name)
		}
		if resp := r.answer(bob); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s, within its limit while the line is full: status = %d; want 503", bob.name, resp.StatusCode)
		}
		st := r.srv.Stats()
		wantStat(t, "Limited", st.Limited, 1, "")
		wantStat(t, "Shed", st.Shed, 1, "")
	})
}

func testShedModeSkipsLimiter(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeShed, 1, time.Second, 1, 0)
		// A limiter that refuses everyone: if shed mode reached it, every
		// answer would be 429.
		lim := &scriptedLimiter{answer: func(string) (bool, time.Duration) { return false, time.Second }}
		r := newRig(t, impl, cfg, lim)
		var calls []*call
		for _, name := range []string{"1st", "2nd", "3rd"} {
			calls = append(calls, r.send("the "+name+" request", "alice", 0))
			r.settle()
		}
		r.sleep(time.Minute)
		want := []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable}
		for i, c := range calls {
			if got := r.answer(c).StatusCode; got != want[i] {
				t.Errorf("%s in shed mode (1 slot, MaxWaiting 1): status = %d; want %d", c.name, got, want[i])
			}
		}
		if n := len(lim.calls()); n != 0 {
			t.Errorf("shed mode called TryTake %d times; want 0 (only the bucket modes limit per client; job.Limiter() is nil in shed mode)", n)
		}
		wantStat(t, "Limited", r.srv.Stats().Limited, 0, "shed mode never answers 429")
	})
}

// ---------------------------------------------------------------------------
// Load shedding.

func testShedWhenLineFull(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		// 1 slot of 1 s and room for 3 in line: the line drains in 3 s, so
		// a Retry-After of 1 would be wrong.
		cfg := config(fakegpu.ModeShed, 1, time.Second, 3, 0)
		r := newRig(t, impl, cfg, nil)
		var accepted []*call
		accepted = append(accepted, r.send("request 1", "alice", 0)) // takes the slot
		r.settle()
		for i := 2; i <= 1+cfg.MaxWaiting; i++ {
			waiting := r.srv.Stats().Waiting
			c := r.send(fmt.Sprintf("request %d", i), "alice", 0)
			r.settle()
			if c.done() {
				t.Fatalf("%s found %d waiting (MaxWaiting %d) and was answered %d at once; want it to join the line",
					c.name, waiting, cfg.MaxWaiting, r.answer(c).StatusCode)
			}
			accepted = append(accepted, c)
		}
		st := r.srv.Stats()
		if st.Waiting != int64(cfg.MaxWaiting) || st.InFlight != 1 {
			t.Fatalf("after %d requests: Stats() Waiting = %d, InFlight = %d; want %d, 1",
				len(accepted), st.Waiting, st.InFlight, cfg.MaxWaiting)
		}

		late := r.send(fmt.Sprintf("request %d", len(accepted)+1), "alice", 0)
		r.settle()
		if !late.done() {
			t.Fatalf("%s arrived with the line full (%d waiting, MaxWaiting %d) and is still waiting; "+
				"want 503 at once, before it joins the line (check job.Waiting() before job.Acquire)",
				late.name, cfg.MaxWaiting, cfg.MaxWaiting)
		}
		resp := r.answer(late)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s arrived with the line full: status = %d (body %q); want 503", late.name, resp.StatusCode, r.body(late))
		}
		if late.took() != 0 {
			t.Errorf("%s: 503 after %v; want it at once", late.name, late.took())
		}
		drain := time.Duration(cfg.MaxWaiting) * cfg.Work / time.Duration(cfg.Slots)
		if got, err := retryAfter(resp); err != nil {
			t.Errorf("%s: %v; want the drain time in whole seconds", late.name, err)
		} else if want := ceilSeconds(drain); got != want {
			t.Errorf("%s: Retry-After = %d; want %d (the %d requests waiting drain in %v at %g per second, rounded up)",
				late.name, got, want, cfg.MaxWaiting, drain, cfg.Capacity())
		}
		st = r.srv.Stats()
		wantStat(t, "Shed", st.Shed, 1, "")
		wantStat(t, "Expired", st.Expired, 0, "a shed request never takes a slot")
		wantStat(t, "MaxWaiting", st.MaxWaiting, int64(cfg.MaxWaiting), "a shed request never joins the line")

		// Deadline 0: everyone who got in is served, however long it waited.
		r.sleep(time.Minute)
		for _, c := range accepted {
			if got := r.answer(c).StatusCode; got != http.StatusOK {
				t.Errorf("%s, accepted into the line: status = %d; want 200", c.name, got)
			}
		}
		st = r.srv.Stats()
		wantStat(t, "Finished", st.Finished, int64(len(accepted)), "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
		wantStat(t, "Waiting", st.Waiting, 0, "")
	})
}

func testShedBeforeSlot(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeShed, 2, 100*time.Millisecond, 4, 0)
		r := newRig(t, impl, cfg, nil)
		const n = 20
		admitted := cfg.Slots + cfg.MaxWaiting
		calls := make([]*call, n)
		for i := range calls {
			calls[i] = r.send(fmt.Sprintf("request %d", i+1), "alice", 0)
			r.sleep(time.Microsecond)
			if st := r.srv.Stats(); st.InFlight > int64(cfg.Slots) {
				t.Fatalf("Stats().InFlight = %d; want at most %d (Slots)", st.InFlight, cfg.Slots)
			}
		}
		// 20 µs in: nothing has finished yet.
		immediate := 0
		for _, c := range calls {
			if c.done() {
				immediate++
				if got := r.answer(c).StatusCode; got != http.StatusServiceUnavailable {
					t.Errorf("%s, answered during the burst: status = %d; want 503", c.name, got)
				}
			}
		}
		if want := n - admitted; immediate != want {
			t.Errorf("%d of %d requests were answered during the burst; want %d (%d slots + %d places in line take %d, "+
				"the rest get 503 at once, before they join the line)",
				immediate, n, want, cfg.Slots, cfg.MaxWaiting, admitted)
		}
		r.sleep(time.Minute)
		for _, c := range calls {
			r.answer(c)
		}
		st := r.srv.Stats()
		wantStat(t, "Expired", st.Expired, 0,
			"with Deadline 0 a 503 counted as expired means the request took a slot first; shed before job.Acquire")
		wantStat(t, "Shed", st.Shed, int64(n-admitted), "")
		wantStat(t, "Finished", st.Finished, int64(admitted), "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
		wantStat(t, "Leaked", st.Leaked, 0, "")
	})
}

// ---------------------------------------------------------------------------
// Deadlines and clients that leave.

func testDeadlineExpiry(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		// 1 slot of 1 s, deadline 1.5 s. a runs 0–1 s; b waits 1 s and runs
		// 1–2 s; c and d reach the front at 2 s, too late: 503, no work;
		// e, arriving at 1.9 s, gets the slot they give back and runs 2–3 s.
		cfg := config(fakegpu.ModeShed, 1, time.Second, 4, 1500*time.Millisecond)
		r := newRig(t, impl, cfg, nil)
		a := r.send("a", "alice", 0)
		r.sleep(time.Microsecond)
		b := r.send("b", "alice", 0)
		r.sleep(time.Microsecond)
		c := r.send("c", "alice", 0)
		r.sleep(time.Microsecond)
		d := r.send("d", "alice", 0)
		r.sleep(1900*time.Millisecond - 3*time.Microsecond)
		e := r.send("e", "alice", 0)
		r.sleep(time.Minute)

		st := r.srv.Stats()
		wantStat(t, "Leaked", st.Leaked, 0,
			"a request returned still holding its slot; on the deadline path, release the slot before answering 503")
		for _, x := range []*call{a, b, c, d, e} {
			if !x.done() {
				t.Fatalf("request %s is still waiting for an answer after %v; want all answered within 3 s (was a slot never released?)",
					x.name, x.took())
			}
		}
		for _, x := range []*call{a, b} {
			if got := r.answer(x).StatusCode; got != http.StatusOK {
				t.Errorf("request %s reached the front within the deadline: status = %d; want 200", x.name, got)
			}
		}
		for _, x := range []*call{c, d} {
			resp := r.answer(x)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("request %s waited %v for a slot (Deadline %v): status = %d; want 503 without doing the work",
					x.name, 2*time.Second-x.sent.Sub(a.sent), cfg.Deadline, resp.StatusCode)
				continue
			}
			if want := 2*time.Second - x.sent.Sub(a.sent); x.took() != want {
				t.Errorf("request %s: 503 after %v; want it after %v, as soon as it reached the front", x.name, x.took(), want)
			}
		}
		if resp := r.answer(e); resp.StatusCode != http.StatusOK {
			t.Errorf("request e waited 100ms: status = %d; want 200", resp.StatusCode)
		} else if want := 100*time.Millisecond + cfg.Work; e.took() != want {
			t.Errorf("request e answered after %v; want %v (it gets the slot the expired requests give back at once)",
				e.took(), want)
		}
		wantStat(t, "Expired", st.Expired, 2, "requests that reach the front after Deadline must get 503")
		wantStat(t, "Finished", st.Finished, 3, "an expired request's work must not be done")
		wantStat(t, "Shed", st.Shed, 0, "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
	})
}

func testDeadlineZeroIsOff(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeShed, 1, time.Second, 4, 0)
		r := newRig(t, impl, cfg, nil)
		calls := make([]*call, 5)
		for i := range calls {
			calls[i] = r.send(fmt.Sprintf("request %d", i+1), "alice", 0)
			r.sleep(time.Microsecond)
		}
		r.sleep(time.Minute)
		for i, c := range calls {
			if got := r.answer(c).StatusCode; got != http.StatusOK {
				t.Errorf("%s waited for the %d ahead of it with Deadline 0 (check off): status = %d; want 200",
					c.name, i, got)
			}
		}
		st := r.srv.Stats()
		wantStat(t, "Expired", st.Expired, 0, "Deadline 0 turns the deadline check off")
		wantStat(t, "Finished", st.Finished, int64(len(calls)), "")
	})
}

func testClientLeavesLine(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeShed, 1, time.Second, 4, 0)
		r := newRig(t, impl, cfg, nil)
		r.send("a", "alice", 0)
		r.sleep(time.Microsecond)
		leaver := r.send("b, whose client gives up after 300ms", "bob", 300*time.Millisecond)
		r.sleep(time.Minute)
		r.answer(leaver)
		if got, want := leaver.took(), 300*time.Millisecond; got != want {
			t.Errorf("%s: answered after %v; want after %v, when the client left "+
				"(wait for the slot with r.Context(), so a request leaves the line with its client)",
				leaver.name, got, want)
		}
		if got := r.answer(leaver).StatusCode; got != http.StatusServiceUnavailable {
			t.Errorf("%s: status = %d; want 503 (job.Acquire failed)", leaver.name, got)
		}
		st := r.srv.Stats()
		wantStat(t, "Dead", st.Dead, 0, "work was done for a client that had already left")
		wantStat(t, "Finished", st.Finished, 1, "")
		wantStat(t, "Waiting", st.Waiting, 0, "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
	})
}

// ---------------------------------------------------------------------------
// Under load.

func testLineBound(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		cfg := fakegpu.DefaultConfig() // 8 slots of 100 ms, MaxWaiting 16, Deadline 800 ms
		cfg.Mode = fakegpu.ModeShed
		r := newRig(t, impl, cfg, nil)
		// Two bursts of 400, each far beyond the 8 + 16 the server can hold.
		var calls []*call
		for burst := range 2 {
			for i := range 400 {
				calls = append(calls, r.send(fmt.Sprintf("burst %d request %d", burst+1, i+1), "alice", 0))
				r.sleep(time.Microsecond)
			}
			r.sleep(150 * time.Millisecond)
		}
		r.sleep(time.Minute)
		st := r.srv.Stats()
		if st.MaxWaiting > int64(cfg.MaxWaiting) {
			t.Errorf("Stats().MaxWaiting = %d; want at most %d (MaxWaiting): the line grew past its bound",
				st.MaxWaiting, cfg.MaxWaiting)
		}
		if st.MaxWaiting < int64(cfg.MaxWaiting) {
			t.Errorf("Stats().MaxWaiting = %d; want %d: under a burst the line should fill up to MaxWaiting before shedding",
				st.MaxWaiting, cfg.MaxWaiting)
		}
		codes := map[int]int{}
		for _, c := range calls {
			codes[r.answer(c).StatusCode]++
		}
		if codes[http.StatusOK]+codes[http.StatusServiceUnavailable] != len(calls) {
			t.Errorf("status codes = %v; want only 200 and 503 in shed mode", codes)
		}
		wantStat(t, "Waiting", st.Waiting, 0, "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
		wantStat(t, "Expired", st.Expired, 0, "no request in a line of 16 waits 800ms")
	})
}

func testSlotAlwaysReleased(t *testing.T, impl Impl) {
	inBubble(t, func(t *testing.T) {
		rng := suitekit.Rand(t)
		// Five clients, each refused with its own wait, drawn for this
		// run: under a fraction of a second, whole seconds and a
		// nanosecond, huge, negative, lab.InfDuration.
		clients := make([]string, 5)
		waits := map[string]time.Duration{}
		for i := range clients {
			clients[i] = fmt.Sprintf("%x", rng.Uint64())
			waits[clients[i]] = []time.Duration{
				time.Duration(1 + rng.Int64N(int64(time.Second))),
				time.Duration(1+rng.Int64N(100))*time.Second + time.Nanosecond,
				time.Duration(rng.Int64N(int64(lab.InfDuration))),
				-time.Duration(rng.Int64N(int64(time.Second))),
				lab.InfDuration,
			}[i]
		}
		// denyEvery refuses every k-th call, with the caller's wait.
		denyEvery := func(k int64) func(string) (bool, time.Duration) {
			var n atomic.Int64
			return func(key string) (bool, time.Duration) {
				if n.Add(1)%k != 0 {
					return true, 0
				}
				return false, waits[key]
			}
		}
		// Each server's line takes longer to drain than its deadline, so
		// requests deep in the line expire; clients with little patience
		// leave while waiting or while their work runs.
		servers := []struct {
			name string
			cfg  fakegpu.Config
			lim  fakegpu.Limiter
		}{
			{"shed, deadline 70ms", config(fakegpu.ModeShed, 4, 50*time.Millisecond, 8, 70*time.Millisecond), nil},
			{"shed, deadline off", config(fakegpu.ModeShed, 4, 50*time.Millisecond, 8, 0), nil},
			{"bucket, deadline 60ms", config(fakegpu.ModeBucket, 3, 40*time.Millisecond, 6, 60*time.Millisecond),
				&scriptedLimiter{answer: denyEvery(4)}},
			{"redis, deadline 45ms", config(fakegpu.ModeRedis, 2, 30*time.Millisecond, 4, 45*time.Millisecond),
				&scriptedLimiter{answer: denyEvery(3)}},
		}
		const waves, perWave = 250, 10 // 250 × 10 × 4 servers = 10,000 requests
		rigs := make([]*rig, len(servers))
		calls := make([][]*call, len(servers))
		for i, s := range servers {
			rigs[i] = newRig(t, impl, s.cfg, s.lim)
		}
		patience := []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond}
		for w := range waves {
			// The requests of a wave arrive at one instant, truly
			// concurrently; waves come in uneven gaps, 0 to 30 ms apart.
			for i, r := range rigs {
				for j := range perWave {
					c := r.send(fmt.Sprintf("wave %d request %d", w, j), clients[rng.IntN(len(clients))],
						patience[rng.IntN(len(patience))])
					calls[i] = append(calls[i], c)
				}
			}
			time.Sleep(time.Duration(rng.IntN(31)) * time.Millisecond)
			for _, r := range rigs {
				r.checkPanics()
			}
		}
		time.Sleep(time.Minute)
		for i, r := range rigs {
			name := servers[i].name
			r.checkPanics()
			st := r.srv.Stats()
			if st.Leaked != 0 || st.InFlight != 0 || st.Waiting != 0 {
				t.Errorf("%s server after %d requests: Stats() Leaked = %d, InFlight = %d, Waiting = %d; want 0, 0, 0 "+
					"(every path that took a slot must release it)", name, len(calls[i]), st.Leaked, st.InFlight, st.Waiting)
			}
			if st.Received != int64(len(calls[i])) {
				t.Errorf("%s server: Stats().Received = %d; want %d", name, st.Received, len(calls[i]))
			}
			codes := map[int]int{}
			stuck := 0
			var badRetry []string
			for _, c := range calls[i] {
				if !c.done() {
					stuck++
					continue
				}
				resp := c.rec.Result()
				codes[resp.StatusCode]++
				if resp.StatusCode == http.StatusOK {
					continue
				}
				if p := refusalFormat(resp, c.rec.Body.String()); p != "" {
					badRetry = append(badRetry, fmt.Sprintf("%s, %d: %s", c.name, resp.StatusCode, p))
				}
				got, err := retryAfter(resp)
				switch {
				case resp.StatusCode == http.StatusTooManyRequests && waits[c.client] == lab.InfDuration:
					if err != nil || got < 1 {
						badRetry = append(badRetry, fmt.Sprintf("%s, 429 for a wait of lab.InfDuration: Retry-After %d (%v); want at least 1",
							c.name, got, err))
					}
				case resp.StatusCode == http.StatusTooManyRequests:
					if want := ceilSeconds(waits[c.client]); err != nil || got != want {
						badRetry = append(badRetry, fmt.Sprintf("%s, 429 for a wait of %v: Retry-After %d (%v); want %d",
							c.name, waits[c.client], got, err, want))
					}
				case c.patience == 0 || c.took() < c.patience: // the client was still there
					if err != nil || got < 1 {
						badRetry = append(badRetry, fmt.Sprintf("%s, %d after %v to a client still waiting: Retry-After %d (%v); want one, at least 1",
							c.name, resp.StatusCode, c.took(), got, err))
					}
				}
			}
			t.Logf("%s server: status codes %v; %+v", name, codes, st)
			if stuck > 0 {
				t.Errorf("%s server: %d of %d requests never got an answer; want all answered", name, stuck, len(calls[i]))
			}
			if len(badRetry) > 0 {
				t.Errorf("%s server: %d refusals without the right Retry-After or body, such as\n%s",
					name, len(badRetry), strings.Join(badRetry[:min(len(badRetry), 3)], "\n"))
			}
			if int64(codes[http.StatusOK]) != st.Finished {
				t.Errorf("%s server: %d answers were 200 but Stats().Finished = %d; want equal (200 only after job.Work)",
					name, codes[http.StatusOK], st.Finished)
			}
			for code := range codes {
				if code != http.StatusOK && code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests {
					t.Errorf("%s server: status codes = %v; want only 200, 429 and 503", name, codes)
					break
				}
			}
		}
	})
}

func testNoGoroutineLeak(t *testing.T, impl Impl) {
	before := runtime.NumGoroutine()
	inBubble(t, func(t *testing.T) {
		cfg := config(fakegpu.ModeBucket, 2, 100*time.Millisecond, 3, 250*time.Millisecond)
		var n atomic.Int64
		lim := &scriptedLimiter{answer: func(string) (bool, time.Duration) {
			return n.Add(1)%5 != 0, 200 * time.Millisecond
		}}
		r := newRig(t, impl, cfg, lim)
		for i := range 200 {
			patience := time.Duration(i%4) * 90 * time.Millisecond // 0 (forever), 90, 180, 270 ms
			r.send(fmt.Sprintf("request %d", i+1), "alice", patience)
			if i%10 == 9 {
				r.sleep(20 * time.Millisecond)
			}
		}
		r.sleep(time.Minute)
		st := r.srv.Stats()
		wantStat(t, "Waiting", st.Waiting, 0, "")
		wantStat(t, "InFlight", st.InFlight, 0, "")
		// The bubble itself fails if any goroutine is still blocked once
		// this function and its cleanups have returned.
	})
	// Goroutines take a moment to be counted out after they exit.
	after := runtime.NumGoroutine()
	for end := time.Now().Add(2 * time.Second); after > before && time.Now().Before(end); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Errorf("runtime.NumGoroutine() = %d after the requests, %d before; want no more than before", after, before)
	}
}

// ---------------------------------------------------------------------------
// Helpers.

// config returns a server configuration for mode with the given slots, work,
// line bound and deadline, and the default buckets.
func config(mode fakegpu.Mode, slots int, work time.Duration, maxWaiting int, deadline time.Duration) fakegpu.Config {
	cfg := fakegpu.DefaultConfig()
	cfg.Mode = mode
	cfg.Slots, cfg.Work = slots, work
	cfg.MaxWaiting, cfg.Deadline = maxWaiting, deadline
	return cfg
}

// retryAfter returns the Retry-After header of resp as whole seconds.
func retryAfter(resp *http.Response) (int, error) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, errors.New("no Retry-After header")
	}
	n, err := strconv.Atoi(v)
	if err != nil || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("Retry-After = %q, not a whole number of seconds", v)
	}
	return n, nil
}

// wantStat reports a Stats field that differs from what it should be.
func wantStat(t *testing.T, field string, got, want int64, why string) {
	t.Helper()
	if got == want {
		return
	}
	if why != "" {
		why = ": " + why
	}
	t.Errorf("Stats().%s = %d; want %d%s", field, got, want, why)
}

// panicMessage describes v, a value the code under test panicked with. A
// stub's panic becomes its own message, such as "task 2: Admit is not
// implemented yet"; anything else gets a stack to find it by.
func panicMessage(what string, v any, stack []byte) string {
	if err, ok := v.(error); ok && errors.Is(err, lab.ErrNotImplemented) {
		return err.Error()
	}
	return fmt.Sprintf("%s panicked: %v\n%s", what, v, panicFrames(stack))
}

// panicFrames returns the frames of stack from where the panic was raised,
// at most 16 lines: enough to find the line in the code under test.
func panicFrames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") {
			lines = lines[i+2:] // skip panic( and its file line
			break
		}
	}
	return strings.Join(lines[:min(len(lines), 16)], "\n")
}

// guard calls f, which calls the code under test, and fails the test if it
// panics.
func guard(t *testing.T, what string, f func()) {
	t.Helper()
	msg := func() (msg string) {
		defer func() {
			if v := recover(); v != nil {
				msg = panicMessage(what, v, debug.Stack())
			}
		}()
		f()
		return ""
	}()
	if msg != "" {
		t.Fatal(msg)
	}
}

// inBubble runs f in a synctest bubble. synctest.Test panics when the
// bubble's goroutines deadlock or outlive f; inBubble turns that into a
// failure of this subtest alone.
func inBubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("synctest: %v; want every goroutine of the test to end "+
				"(is a request stuck for good on a slot never released, or a goroutine started by Admit that never ends?)", v)
		}
	}()
	suitekit.Bubble(t, f)
}

// take is one TryTake call.
type take struct {
	key string
	n   float64
}

// scriptedLimiter is a fakegpu.Limiter whose answers the test decides. It
// records every call. A nil answer allows everything.
type scriptedLimiter struct {
	answer func(key string) (bool, time.Duration)
	mu     sync.Mutex
	takes  []take
}

func (l *scriptedLimiter) TryTake(key string, n float64) (bool, time.Duration) {
	l.mu.Lock()
	l.takes = append(l.takes, take{key, n})
	l.mu.Unlock()
	if l.answer == nil {
		return true, 0
	}
	return l.answer(key)
}

func (l *scriptedLimiter) calls() []take {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]take(nil), l.takes...)
}

// rig is one fake GPU server in a bubble, with the code under test as its
// admission logic, and the requests sent to it.
type rig struct {
	t   *testing.T
	srv *fakegpu.Server
	wg  sync.WaitGroup

	mu       sync.Mutex
	panicMsg string // the first panic of the admission code
}

// newRig creates the server inside the current bubble. When the test ends,
// its context cancels every request still waiting, the server is closed and
// every request goroutine has returned.
func newRig(t *testing.T, impl Impl, cfg fakegpu.Config, lim fakegpu.Limiter) *rig {
	t.Helper()
	r := &rig{t: t}
	admit := func(w http.ResponseWriter, req *http.Request, job *fakegpu.Job) {
		// Admit runs on a request goroutine, where a panic would crash the
		// whole test binary: keep it, and report it from the test.
		defer func() {
			if v := recover(); v != nil {
				r.mu.Lock()
				if r.panicMsg == "" {
					r.panicMsg = panicMessage("Admit", v, debug.Stack())
				}
				r.mu.Unlock()
				http.Error(w, "Admit panicked", http.StatusInternalServerError)
			}
		}()
		impl.Admit(w, req, job)
	}
	opts := []fakegpu.Option{fakegpu.WithAdmission(fakegpu.AdmissionFunc(admit))}
	if lim != nil {
		opts = append(opts, fakegpu.WithLimiter(lim))
	}
	srv, err := fakegpu.New(cfg, opts...)
	if err != nil {
		t.Fatalf("fakegpu.New(%+v) = %v; want a server (a bug in the suite)", cfg, err)
	}
	r.srv = srv
	t.Cleanup(func() {
		srv.Close()
		r.wg.Wait()
	})
	return r
}

// checkPanics fails the test if the admission code has panicked.
func (r *rig) checkPanics() {
	r.t.Helper()
	r.mu.Lock()
	msg := r.panicMsg
	r.mu.Unlock()
	if msg != "" {
		r.t.Fatal(msg)
	}
}

// settle waits until every request is blocked or answered, without letting
// time pass.
func (r *rig) settle() {
	r.t.Helper()
	synctest.Wait()
	r.checkPanics()
}

// sleep lets d of fake time pass.
func (r *rig) sleep(d time.Duration) {
	r.t.Helper()
	time.Sleep(d)
	r.checkPanics()
}

// call is one GET /generate in flight.
type call struct {
	name     string
	client   string        // X-Client-Id
	patience time.Duration // 0: waits until the test ends
	rec      *httptest.ResponseRecorder
	sent     time.Time
	answered time.Time // set before finished is closed
	finished chan struct{}
}

// send starts a GET /generate from client (its X-Client-Id; "" for none) on
// its own goroutine. A client with patience > 0 hangs up after that long;
// otherwise it waits until the test ends.
func (r *rig) send(name, client string, patience time.Duration) *call {
	ctx, cancel := context.WithCancel(r.t.Context())
	if patience > 0 {
		ctx, cancel = context.WithTimeout(r.t.Context(), patience)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/generate", nil)
	if client != "" {
		req.Header.Set("X-Client-Id", client)
	}
	c := &call{name: name, client: client, patience: patience, rec: httptest.NewRecorder(), sent: time.Now(), finished: make(chan struct{})}
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

// done reports whether c has been answered.
func (c *call) done() bool {
	select {
	case <-c.finished:
		return true
	default:
		return false
	}
}

// took returns how long c took to be answered, or has waited so far.
func (c *call) took() time.Duration {
	if !c.done() {
		return time.Since(c.sent)
	}
	return c.answered.Sub(c.sent)
}

// answer returns c's response, failing the test if c has none yet.
func (r *rig) answer(c *call) *http.Response {
	r.t.Helper()
	r.checkPanics()
	if !c.done() {
		r.t.Fatalf("%s is still waiting for an answer after %v; want one by now", c.name, c.took())
	}
	return c.rec.Result()
}

// body returns c's response body, cut to a readable length.
func (r *rig) body(c *call) string {
	r.t.Helper()
	r.answer(c)
	b := c.rec.Body.String()
	if len(b) > 200 {
		b = b[:200] + "..."
	}
	return b
}
