package breakersuite

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
)

// --- Model: random settings and sequences against a plain state machine ---

// breakerModel is the contract of a Breaker written as plainly as possible:
// the window is a list of the last Window outcomes, every transition starts
// a new generation, and time is compared lazily.
type breakerModel struct {
	cfg    Settings // with the defaults applied
	state  State
	gen    int
	window []bool // true for a failure, oldest first
	until  time.Time
	trials int // trial calls let through and not reported
	passed int // trial calls that succeeded
}

// effective returns s with the defaults BreakerSettings documents.
func effective(s Settings) Settings {
	if s.Window <= 0 {
		s.Window = 20
	}
	if !(s.FailureRatio > 0 && s.FailureRatio < 1) {
		s.FailureRatio = 0.5
	}
	if s.MinCalls <= 0 {
		s.MinCalls = 10
	}
	s.MinCalls = min(s.MinCalls, s.Window)
	if s.Cooldown <= 0 {
		s.Cooldown = 30 * time.Second
	}
	if s.HalfOpenMax <= 0 {
		s.HalfOpenMax = 1
	}
	return s
}

func (m *breakerModel) set(st State, now time.Time) {
	m.state = st
	m.gen++
	switch st {
	case Closed:
		m.window = m.window[:0]
	case Open:
		m.until = now.Add(m.cfg.Cooldown)
	case HalfOpen:
		m.trials, m.passed = 0, 0
	}
}

// advance makes the transition time alone causes.
func (m *breakerModel) advance(now time.Time) {
	if m.state == Open && !now.Before(m.until) {
		m.set(HalfOpen, now)
	}
}

// allow reports whether a call may go, and its generation.
func (m *breakerModel) allow(now time.Time) (ok bool, gen int) {
	m.advance(now)
	switch m.state {
	case Open:
		return false, 0
	case HalfOpen:
		if m.trials >= m.cfg.HalfOpenMax {
			return false, 0
		}
		m.trials++
	}
	return true, m.gen
}

// verdict says whether a closed window of f failures in c outcomes opens
// the breaker, and whether the two usual ways to compute "more than the
// ratio" (f/c > ratio, f > ratio·c) disagree there, in which case either
// answer is right: they differ only where f/c equals the ratio as written,
// up to the rounding of a float.
func verdict(f, c int, ratio float64) (open, either bool) {
	byDivision := float64(f)/float64(c) > ratio
	byProduct := float64(f) > ratio*float64(c)
	return byDivision, byDivision != byProduct
}

// report counts the outcome of a call of generation gen; either is true
// when the window's verdict may go both ways (see verdict).
func (m *breakerModel) report(gen int, success bool, now time.Time) (either bool) {
	if gen != m.gen {
		return false // a stale outcome changes nothing
	}
	switch m.state {
	case Closed:
		m.window = append(m.window, !success)
		if len(m.window) > m.cfg.Window {
			m.window = m.window[1:]
		}
		if len(m.window) < m.cfg.MinCalls {
			return false
		}
		f := 0
		for _, failed := range m.window {
			if failed {
				f++
			}
		}
		open, either := verdict(f, len(m.window), m.cfg.FailureRatio)
		if open && !either {
			m.set(Open, now)
		}
		return either
	case HalfOpen:
		m.trials--
		if !success {
			m.set(Open, now)
			return false
		}
		m.passed++
		if m.passed >= m.cfg.HalfOpenMax {
			m.set(Closed, now)
		}
	}
	return false
}

// drawSettings draws settings for one case: mostly valid ones of every
// size, sometimes zero or invalid fields that mean the defaults.
func drawSettings(t *rapid.T) Settings {
	var s Settings
	switch rapid.IntRange(0, 9).Draw(t, "window_kind") {
	case 0:
		s.Window = rapid.IntRange(-3, 0).Draw(t, "window")
	case 1:
		s.Window = rapid.IntRange(65, 300).Draw(t, "window")
	default:
		s.Window = rapid.IntRange(1, 64).Draw(t, "window")
	}
	switch rapid.IntRange(0, 9).Draw(t, "ratio_kind") {
	case 0:
		s.FailureRatio = rapid.SampledFrom([]float64{0, 1, -0.25, 1.5, math.NaN(), math.Inf(1), math.Inf(-1)}).Draw(t, "ratio")
	case 1, 2, 3:
		s.FailureRatio = float64(rapid.IntRange(1, 99).Draw(t, "ratio_percent")) / 100
	default:
		s.FailureRatio = float64(rapid.IntRange(1, 63).Draw(t, "ratio_64ths")) / 64
	}
	w := max(s.Window, 1)
	if s.Window <= 0 {
		w = 20
	}
	s.MinCalls = rapid.IntRange(-2, w+5).Draw(t, "min_calls")
	if rapid.IntRange(0, 9).Draw(t, "cooldown_kind") == 0 {
		s.Cooldown = time.Duration(rapid.Int64Range(-int64(time.Second), 0).Draw(t, "cooldown"))
	} else {
		s.Cooldown = time.Duration(rapid.Int64Range(1, int64(10*time.Minute)).Draw(t, "cooldown"))
	}
	s.HalfOpenMax = rapid.IntRange(-1, 8).Draw(t, "half_open_max")
	return s
}

// outstanding is a call let through and not yet reported, or reported
// already (a second report must change nothing).
type outstanding struct {
	done     func(bool)
	gen      int
	id       int
	reported bool
}

// A modelStep is one drawn step of a case. Its numbers are abstract (which
// call to report is a fraction of the calls out; a sleep is a kind and a
// fraction), so that the whole case is drawn before it runs: rapid's draws
// must happen outside the synctest bubble, where its panics can be caught.
type modelStep struct {
	kind     int     // 0 Allow, 1 report, 2 a run of calls, 3 sleep, 4 State, 5 a round trip
	pick     float64 // report: which call out, as a fraction of them
	success  bool    // report: the outcome
	outcomes []bool  // a run: the outcome of each call, true for success
	sleep    sleepDraw
}

// sleepDraw is a drawn sleep, resolved against the breaker's state when it
// runs (drawSleep).
type sleepDraw struct {
	openKind, kind int
	after          time.Duration // past the end of the cooldown
	ns             time.Duration
	frac           float64 // of the cooldown
	long           time.Duration
}

// drawSteps draws a case's steps.
func drawSteps(t *rapid.T) []modelStep {
	steps := make([]modelStep, rapid.IntRange(1, 60).Draw(t, "steps"))
	for i := range steps {
		st := &steps[i]
		switch a := rapid.IntRange(0, 10).Draw(t, "action"); {
		case a <= 2:
			st.kind = 0
		case a <= 5:
			st.kind = 1
			st.pick = rapid.Float64Range(0, 1).Draw(t, "pick")
			st.success = rapid.Bool().Draw(t, "success")
		case a == 6:
			// A run of calls, each reported as soon as it is let through,
			// failing with a share of its own: windows fill.
			st.kind = 2
			share := rapid.Float64Range(0, 1).Draw(t, "failing")
			st.outcomes = make([]bool, rapid.IntRange(1, 80).Draw(t, "run"))
			for j := range st.outcomes {
				st.outcomes[j] = rapid.Float64Range(0, 1).Draw(t, "outcome") >= share
			}
		case a <= 8:
			st.kind = 3
			st.sleep = sleepDraw{
				openKind: rapid.IntRange(0, 3).Draw(t, "sleep_open_kind"),
				kind:     rapid.IntRange(0, 2).Draw(t, "sleep_kind"),
				after:    time.Duration(rapid.Int64Range(1, int64(time.Second)).Draw(t, "sleep_after")),
				ns:       time.Duration(rapid.Int64Range(1, 1000).Draw(t, "sleep_ns")),
				frac:     rapid.Float64Range(0, 1).Draw(t, "sleep_frac"),
				long:     time.Duration(rapid.Int64Range(1, int64(24*time.Hour)).Draw(t, "sleep_long")),
			}
		case a == 9:
			st.kind = 4
		default:
			// A round trip through every state back to closed, so that
			// what a breaker carries from one closed spell into the next
			// (counters it never resets) is tested in most cases, not
			// only when the random steps happen to go round.
			st.kind = 5
		}
	}
	return steps
}

func (s *suite) model(t *testing.T) {
	suitekit.NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		cfg := drawSettings(rt)
		steps := drawSteps(rt)
		var msg string
		suitekit.Bubble(t, func(t *testing.T) { msg = s.runModel(cfg, steps) })
		if msg != "" {
			rt.Fatal(msg)
		}
	})
}

// runModel runs one case in a bubble and returns what went wrong, or "".
func (s *suite) runModel(cfg Settings, steps []modelStep) string {
	m := &breakerModel{cfg: effective(cfg)}
	var (
		b     Breaker
		calls []*outstanding
		trace []string
		ids   int
	)
	start := time.Now()
	note := func(format string, args ...any) {
		trace = append(trace, fmt.Sprintf("t=%v ", time.Since(start))+fmt.Sprintf(format, args...))
	}
	wrong := func(format string, args ...any) string {
		if len(trace) > 25 {
			trace = append([]string{"…"}, trace[len(trace)-25:]...)
		}
		return fmt.Sprintf("%s\nNewBreaker(%+v), which means %+v; what happened (failure: done(false)):\n  %s",
			fmt.Sprintf(format, args...), cfg, m.cfg, strings.Join(trace, "\n  "))
	}
	if r, stack := suitekit.Catch(func() { b = s.impl.New(cfg) }); r != nil {
		return suitekit.PanicReport(fmt.Sprintf("NewBreaker(%+v)", cfg), r, stack)
	}
	if isNil(b) {
		return fmt.Sprintf("NewBreaker(%+v) = nil; want a breaker", cfg)
	}
	// allow calls Allow and checks its answer; a call let through is
	// returned.
	allow := func() (*outstanding, string) {
		before := time.Now()
		var done func(bool)
		var err error
		if r, stack := suitekit.Catch(func() { done, err = b.Allow() }); r != nil {
			return nil, suitekit.PanicReport("Allow()", r, stack)
		}
		if took := time.Since(before); took != 0 {
			return nil, wrong("Allow() took %v of time; want an answer at once: never sleep or wait in Allow, not even to slow callers down", took)
		}
		ok, gen := m.allow(before)
		switch {
		case ok && (err != nil || done == nil):
			note("Allow() = (%s, %v)", doneString(done), err)
			return nil, wrong("Allow() = (%s, %v); want (done, nil): the breaker is %v%s", doneString(done), err, m.state, m.why())
		case !ok && (!errors.Is(err, s.impl.ErrOpen) || done != nil):
			note("Allow() = (%s, %v)", doneString(done), err)
			return nil, wrong("Allow() = (%s, %v); want (nil, ErrOpen): the breaker is %v%s", doneString(done), err, m.state, m.why())
		case !ok:
			note("Allow() = ErrOpen (%v)", m.state)
			return nil, ""
		}
		ids++
		c := &outstanding{done: done, gen: gen, id: ids}
		calls = append(calls, c)
		note("Allow() = call %d, let through while %v", ids, m.state)
		return c, ""
	}
	// report calls c's done and checks that it returns at once.
	report := func(c *outstanding, success bool) string {
		before := time.Now()
		if r, stack := suitekit.Catch(func() { c.done(success) }); r != nil {
			return suitekit.PanicReport(fmt.Sprintf("done(%v) of call %d", success, c.id), r, stack)
		}
		if took := time.Since(before); took != 0 {
			return wrong("done(%v) took %v of time; want it to return at once", success, took)
		}
		switch {
		case c.reported:
			note("call %d: done(%v) again (ignored)", c.id, success)
		case c.gen != m.gen:
			note("call %d: done(%v) (stale: let through in an earlier state)", c.id, success)
		default:
			note("call %d: done(%v)", c.id, success)
			if m.report(c.gen, success, before) {
				// Either verdict is right; follow the breaker's.
				st, msg := s.observe(b)
				if msg != "" {
					return msg
				}
				if st == Open && m.state == Closed {
					m.set(Open, before)
					note("(the failed share equals the ratio as written: the breaker opened, which is fine)")
				}
			}
		}
		c.reported = true
		return ""
	}
	// compare checks State against the model.
	compare := func() string {
		st, msg := s.observe(b)
		if msg != "" {
			return msg
		}
		m.advance(time.Now())
		if st != m.state {
			return wrong("State() = %v; want %v%s", st, m.state, m.why())
		}
		return ""
	}
	// roundTrip takes the breaker from any state through open and
	// half-open back to closed: failures until it opens, a sleep to the end
	// of the cooldown, the trial calls out reported as successes and new
	// ones until it closes. Every step is checked as it goes.
	roundTrip := func() string {
		note("(a round trip back to closed)")
		wentRound := false
		for range 2 * (m.cfg.Window + m.cfg.HalfOpenMax + 2) {
			if msg := compare(); msg != "" {
				return msg
			}
			switch m.state {
			case Closed:
				if wentRound {
					return ""
				}
				c, msg := allow()
				if msg == "" && c != nil {
					msg = report(c, false)
				}
				if msg != "" {
					return msg
				}
			case Open:
				wentRound = true
				d := max(0, time.Until(m.until))
				time.Sleep(d)
				note("sleep %v", d)
			case HalfOpen:
				wentRound = true
				for _, c := range calls {
					if !c.reported && c.gen == m.gen {
						if msg := report(c, true); msg != "" {
							return msg
						}
					}
				}
				if m.state != HalfOpen {
					continue
				}
				c, msg := allow()
				if msg == "" && c != nil {
					msg = report(c, true)
				}
				if msg != "" {
					return msg
				}
			}
		}
		return ""
	}
	for _, st := range steps {
		var msg string
		switch st.kind {
		case 0:
			_, msg = allow()
		case 1:
			if len(calls) > 0 {
				msg = report(calls[min(len(calls)-1, int(st.pick*float64(len(calls))))], st.success)
			}
		case 2:
			for _, success := range st.outcomes {
				var c *outstanding
				if c, msg = allow(); c != nil && msg == "" {
					msg = report(c, success)
				}
				if msg == "" {
					msg = compare()
				}
				if msg != "" {
					break
				}
			}
		case 3:
			d := st.sleep.resolve(m, time.Now())
			time.Sleep(d)
			note("sleep %v", d)
		case 5:
			msg = roundTrip()
		}
		if msg == "" {
			msg = compare()
		}
		if msg != "" {
			return msg
		}
	}
	return ""
}

// observe calls State on b.
func (s *suite) observe(b Breaker) (st State, problem string) {
	if r, stack := suitekit.Catch(func() { st = s.impl.State(b) }); r != nil {
		return 0, suitekit.PanicReport("State()", r, stack)
	}
	return st, ""
}

// why explains the model's state, for messages.
func (m *breakerModel) why() string {
	switch m.state {
	case Closed:
		f := 0
		for _, failed := range m.window {
			if failed {
				f++
			}
		}
		return fmt.Sprintf(" (its window holds %d outcomes of which %d failed; MinCalls=%d, FailureRatio=%v)", len(m.window), f, m.cfg.MinCalls, m.cfg.FailureRatio)
	case Open:
		return fmt.Sprintf(" until its cooldown of %v ends, %v from now", m.cfg.Cooldown, time.Until(m.until))
	}
	return fmt.Sprintf(" (%d trial calls out of HalfOpenMax=%d, %d succeeded)", m.trials, m.cfg.HalfOpenMax, m.passed)
}

// resolve turns a drawn sleep into a duration: when the breaker is open,
// often to the nanosecond around the end of its cooldown.
func (d sleepDraw) resolve(m *breakerModel, now time.Time) time.Duration {
	if m.state == Open {
		left := m.until.Sub(now)
		switch d.openKind {
		case 0:
			return max(0, left-1)
		case 1:
			return max(0, left)
		case 2:
			return max(0, left+d.after)
		}
	}
	switch d.kind {
	case 0:
		return d.ns
	case 1:
		return max(1, time.Duration(d.frac*float64(m.cfg.Cooldown)))
	}
	return d.long
}

// --- RealClock: the same promises outside a bubble ---

// realClock checks, on the machine's own clock and with goroutines that run
// in parallel, what a synctest bubble could hide: half-open never before
// the cooldown has passed and soon after it, refusals that return at once,
// and exactly HalfOpenMax trials when many callers race. Code that behaves
// only while time is fake, or only at the bubble's dates, fails here.
func (s *suite) realClock(t *testing.T) {
	rng := suitekit.Rand(t)
	for round := range 3 {
		cooldown := 30*time.Millisecond + time.Duration(rng.Int64N(int64(40*time.Millisecond)))
		trials := 1 + rng.IntN(8)
		cfg := Settings{Window: 4 + rng.IntN(16), FailureRatio: 0.5, MinCalls: 1, Cooldown: cooldown, HalfOpenMax: trials}
		x := s.breaker(t, cfg)
		done := x.admit("a new breaker is closed")
		before := time.Now()
		x.report(done, false, "the failure that opens it")
		after := time.Now()
		x.expectState(Open, fmt.Sprintf("round %d on the real clock: one failure of one call, with MinCalls=1, is more than 50%%", round+1))

		// Failing fast is failing at once.
		const refusals = 20
		began := time.Now()
		for i := range refusals {
			x.refuse(fmt.Sprintf("round %d on the real clock: refusal %d, %v into a cooldown of %v", round+1, i+1, time.Since(after), cooldown))
		}
		if took := time.Since(began); took > 10*time.Millisecond {
			t.Fatalf("round %d on the real clock: %d refusals while open took %v; want them at once (microseconds): an open breaker fails fast, it never sleeps or waits",
				round+1, refusals, took)
		}

		// Half-open exactly when the cooldown is over: never a moment
		// before, and not long after.
		due := before.Add(cooldown)
		var lastOpen time.Time // when the last State() that said open began
		for {
			asked := time.Now()
			st := x.state()
			answered := time.Now()
			if st == HalfOpen {
				if answered.Before(due) {
					t.Fatalf("round %d on the real clock: State() = half-open %v after the failure that opened it; want open until Cooldown=%v has passed: "+
						"compare the clock with the end of the cooldown to the nanosecond, whatever the date", round+1, answered.Sub(before), cooldown)
				}
				break
			}
			if st != Open {
				t.Fatalf("round %d on the real clock: State() = %v during the cooldown; want open, then half-open", round+1, st)
			}
			lastOpen = asked
			if lastOpen.Sub(after) > cooldown+time.Second {
				t.Fatalf("round %d on the real clock: still open %v after the failure; want half-open once Cooldown=%v has passed", round+1, lastOpen.Sub(after), cooldown)
			}
		}
		if late := lastOpen.Sub(after.Add(cooldown)); late > 200*time.Millisecond {
			t.Fatalf("round %d on the real clock: State() still said open %v after Cooldown=%v had passed; want half-open at once", round+1, late, cooldown)
		}

		// Many callers at once, truly in parallel: exactly HalfOpenMax go.
		callers := 4*trials + 10
		var mu sync.Mutex
		var let []func(bool)
		var other []string
		suitekit.Hammer(t, callers, "Allow()", func(int) {
			done, err := x.b.Allow()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && done != nil:
				let = append(let, done)
			case errors.Is(err, x.impl.ErrOpen) && done == nil:
			default:
				other = append(other, fmt.Sprintf("(%s, %v)", doneString(done), err))
			}
		})
		if len(other) > 0 {
			t.Fatalf("round %d on the real clock: half-open, Allow() from %d goroutines at once returned %s; want (done, nil) or (nil, ErrOpen)", round+1, callers, other[0])
		}
		if len(let) != trials {
			t.Fatalf("round %d on the real clock: half-open with HalfOpenMax=%d, %d goroutines calling Allow() at once: %d let through; want exactly %d",
				round+1, trials, callers, len(let), trials)
		}
		for i, done := range let {
			x.report(done, true, fmt.Sprintf("trial %d", i+1))
		}
		x.expectState(Closed, fmt.Sprintf("round %d on the real clock: HalfOpenMax=%d trials succeeded", round+1, trials))
	}
}
