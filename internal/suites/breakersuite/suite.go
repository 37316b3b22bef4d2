// Package breakersuite is the one test suite of task 7 (circuit breaker).
// The exercise and the reference solution each run it through a thin
// adapter, so both are held to exactly the same checks. Learners do not edit
// it.
//
// Every check is a subtest with a fixed name, such as
// TestBreaker/CooldownExact, and all but RealClock run inside
// testing/synctest bubbles (suitekit.Bubble, whose clock starts at a random
// instant): time.Now is fake and time.Sleep only moves the fake clock, so a
// cooldown is checked to the nanosecond in no real time at all. Every call
// into the code under test goes through a helper that turns a panic into a
// failure of that subtest only, so a stub fails each subtest with its
// "task 7: ... is not implemented yet" and the others still run. Random
// inputs come from the run's seed (suitekit.Rand, and rapid's -rapid.seed
// for Model), printed when a check fails.
//
//	StartsClosed            a new breaker is closed and lets calls through
//	OpensOnFailureRatio     opens when more than FailureRatio of the window failed, not at exactly it,
//	                        also when the share is above the ratio by less than a whole percent
//	RespectsMinCalls        no verdict on fewer than MinCalls outcomes
//	SlidingWindow           only the last Window outcomes count; random runs against a model
//	FailsFastWhileOpen      ErrOpen and a nil done while open; refusals do not restart the cooldown
//	CooldownExact           half-open at exactly Cooldown (random, to the ns) after opening, not 1 ns earlier
//	HalfOpenLimit           exactly HalfOpenMax (random) trial calls at once, when many goroutines race
//	HalfOpenSuccessCloses   HalfOpenMax successes close it, with an empty window
//	HalfOpenFailureReopens  one failed trial opens it for another full Cooldown
//	StaleOutcomesIgnored    outcomes of calls let through before a transition change nothing
//	DoneTwiceIgnored        only the first call of a done function counts
//	DefaultSettings         zero and invalid settings (some random) get the documented defaults
//	Concurrent              goroutines mixing Allow, done and State (run with -race)
//	StateString             "closed", "open", "half-open", "State(n)"
//	Model                   random settings (valid and not, windows up to 300) and random
//	                        sequences of Allow, done (late, twice), sleeps (often to the ns
//	                        around the cooldown's end) and State, each case in a bubble of
//	                        its own, against a plain state machine; no call may take time
//	RealClock               on the machine's clock, outside any bubble: half-open never before
//	                        the cooldown and soon after it, refusals at once, exactly
//	                        HalfOpenMax trials when goroutines race in parallel
//
// A method that blocks for ever, say on a mutex locked twice, hangs its
// subtest instead of failing it: a goroutine waiting for a mutex is not
// durably blocked, so synctest cannot tell. Run the tests with -timeout; the
// timeout report names the subtest that was running.
package breakersuite

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ratelab/internal/suites/suitekit"
)

// Settings has the fields of the package's BreakerSettings, with the same
// names, types and order, so an adapter converts one to the other with a
// plain conversion.
type Settings struct {
	Window       int
	FailureRatio float64
	MinCalls     int
	Cooldown     time.Duration
	HalfOpenMax  int
}

// State is the package's State as the suite sees it: Closed, Open and
// HalfOpen have the same values as the package's constants.
type State int

// The three states, in the order the package declares them.
const (
	Closed State = iota
	Open
	HalfOpen
)

// String names s the way the package's String should, for the suite's own
// messages; the suite never formats a state with the code under test.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Breaker is the part of a *Breaker the suite calls directly.
type Breaker interface {
	Allow() (done func(success bool), err error)
}

// Impl is the code under test, as an adapter wires it up.
type Impl struct {
	// New is NewBreaker, with s converted to the package's BreakerSettings.
	New func(s Settings) Breaker
	// State calls State on b, a breaker New returned, and converts the
	// result.
	State func(b Breaker) State
	// String is the package's State.String for the state with value s.
	String func(s State) string
	// ErrOpen is the package's ErrOpen.
	ErrOpen error
}

// Run runs every check of task 7 against impl, each as a named subtest of t.
func Run(t *testing.T, impl Impl) {
	if impl.New == nil || impl.State == nil || impl.String == nil || impl.ErrOpen == nil {
		t.Fatalf("breakersuite.Run: Impl has a nil field (%+v); want all four set", impl)
	}
	s := &suite{impl: impl}
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"StartsClosed", s.startsClosed},
		{"OpensOnFailureRatio", s.opensOnFailureRatio},
		{"RespectsMinCalls", s.respectsMinCalls},
		{"SlidingWindow", s.slidingWindow},
		{"FailsFastWhileOpen", s.failsFastWhileOpen},
		{"CooldownExact", s.cooldownExact},
		{"HalfOpenLimit", s.halfOpenLimit},
		{"HalfOpenSuccessCloses", s.halfOpenSuccessCloses},
		{"HalfOpenFailureReopens", s.halfOpenFailureReopens},
		{"StaleOutcomesIgnored", s.staleOutcomesIgnored},
		{"DoneTwiceIgnored", s.doneTwiceIgnored},
		{"DefaultSettings", s.defaultSettings},
		{"Concurrent", s.concurrent},
		{"StateString", s.stateString},
	} {
		t.Run(c.name, func(t *testing.T) { suitekit.Bubble(t, c.f) })
	}
	// Model runs every case in a bubble of its own; RealClock runs on the
	// machine's clock, outside any bubble.
	t.Run("Model", s.model)
	t.Run("RealClock", s.realClock)
}

type suite struct {
	impl Impl
}

// --- Calling the code under test ---

// breaker wraps a Breaker under test for one subtest. Its methods fail the
// subtest, rather than crash the test binary, when the code panics, and
// print times as offsets from the breaker's creation.
type breaker struct {
	t     *testing.T
	impl  Impl
	b     Breaker
	cfg   Settings
	start time.Time
	log   []string // the outcomes reported so far, for messages
}

func (s *suite) breaker(t *testing.T, cfg Settings) *breaker {
	t.Helper()
	var b Breaker
	if r, stack := suitekit.Catch(func() { b = s.impl.New(cfg) }); r != nil {
		t.Fatal(suitekit.PanicReport(fmt.Sprintf("NewBreaker(%+v)", cfg), r, stack))
	}
	if isNil(b) {
		t.Fatalf("NewBreaker(%+v) = nil; want a breaker", cfg)
	}
	return &breaker{t: t, impl: s.impl, b: b, cfg: cfg, start: time.Now()}
}

// isNil reports whether b is nil or a nil pointer in an interface.
func isNil(b Breaker) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// now is the fake time since the breaker was made.
func (x *breaker) now() time.Duration { return time.Since(x.start) }

// allow calls Allow.
func (x *breaker) allow() (done func(bool), err error) {
	x.t.Helper()
	if r, stack := suitekit.Catch(func() { done, err = x.b.Allow() }); r != nil {
		x.t.Fatal(suitekit.PanicReport("Allow()", r, stack))
	}
	return done, err
}

// state calls State.
func (x *breaker) state() State {
	x.t.Helper()
	var st State
	if r, stack := suitekit.Catch(func() { st = x.impl.State(x.b) }); r != nil {
		x.t.Fatal(suitekit.PanicReport("State()", r, stack))
	}
	return st
}

func doneString(done func(bool)) string {
	if done == nil {
		return "nil"
	}
	return "done"
}

// admit expects Allow to let the call through and returns its done.
func (x *breaker) admit(why string) func(bool) {
	x.t.Helper()
	done, err := x.allow()
	if err != nil || done == nil {
		x.t.Fatalf("at t=%v: Allow() = (%s, %v); want (done, nil)\n%s%s", x.now(), doneString(done), err, why, x.history())
	}
	return done
}

// refuse expects Allow to fail fast: a nil done and ErrOpen.
func (x *breaker) refuse(why string) {
	x.t.Helper()
	done, err := x.allow()
	if !errors.Is(err, x.impl.ErrOpen) || done != nil {
		x.t.Fatalf("at t=%v: Allow() = (%s, %v); want (nil, ErrOpen)\n%s%s", x.now(), doneString(done), err, why, x.history())
	}
}

// report calls done(success); what names the call in messages.
func (x *breaker) report(done func(bool), success bool, what string) {
	x.t.Helper()
	if r, stack := suitekit.Catch(func() { done(success) }); r != nil {
		x.t.Fatal(suitekit.PanicReport(fmt.Sprintf("done(%v) of %s", success, what), r, stack))
	}
	x.log = append(x.log, fmt.Sprintf("t=%v %s: done(%v)", x.now(), what, success))
}

// expectState fails the subtest unless State reports want.
func (x *breaker) expectState(want State, why string) {
	x.t.Helper()
	if got := x.state(); got != want {
		x.t.Fatalf("at t=%v: State() = %v; want %v\n%s%s", x.now(), got, want, why, x.history())
	}
}

// history lists the last outcomes reported, for failure messages.
func (x *breaker) history() string {
	if len(x.log) == 0 {
		return ""
	}
	lines := x.log
	if len(lines) > 12 {
		lines = append([]string{"…"}, lines[len(lines)-12:]...)
	}
	return fmt.Sprintf("\nsettings %+v; outcomes reported so far:\n  %s", x.cfg, strings.Join(lines, "\n  "))
}

// sequence makes one call per letter of outcomes, S for a success and F for
// a failure, each reported as soon as Allow lets it through, and checks the
// state after each against want: C for closed, O for open. It stops after
// the first O, since an open breaker lets nothing through.
func (x *breaker) sequence(outcomes, want, why string) {
	x.t.Helper()
	if len(outcomes) != len(want) {
		panic("breakersuite: sequence needs one wanted state per outcome")
	}
	for i := range len(outcomes) {
		success := outcomes[i] == 'S'
		done := x.admit(fmt.Sprintf("call %d of %q, while the breaker should still be closed\n%s", i+1, outcomes, why))
		x.report(done, success, fmt.Sprintf("call %d of %q", i+1, outcomes))
		wantState := Closed
		if want[i] == 'O' {
			wantState = Open
		}
		if got := x.state(); got != wantState {
			x.t.Fatalf("at t=%v, after outcome %d of %q: State() = %v; want %v\n%s%s",
				x.now(), i+1, outcomes, got, wantState, why, x.history())
		}
		if wantState == Open {
			x.refuse("an open breaker fails fast")
			return
		}
	}
}

// trip opens a breaker built with MinCalls ≤ calls by reporting calls
// failures, and checks that it is open.
func (x *breaker) trip(calls int, why string) {
	x.t.Helper()
	for i := range calls {
		x.report(x.admit("tripping the breaker: a closed breaker lets every call through\n"+why), false, fmt.Sprintf("failure %d of %d", i+1, calls))
	}
	x.expectState(Open, fmt.Sprintf("after %d failures in a row the breaker must be open\n%s", calls, why))
}

// --- The checks ---

func (s *suite) startsClosed(t *testing.T) {
	x := s.breaker(t, Settings{Window: 10, FailureRatio: 0.5, MinCalls: 5, Cooldown: time.Minute, HalfOpenMax: 1})
	x.expectState(Closed, "a new breaker is closed")
	for i := range 100 {
		x.report(x.admit("a closed breaker lets every call through"), true, fmt.Sprintf("success %d", i+1))
	}
	x.expectState(Closed, "100 successes keep the breaker closed")
	time.Sleep(time.Hour)
	x.expectState(Closed, "time alone never opens a closed breaker")

	// Calls still out count nothing until they report.
	var out []func(bool)
	for range 50 {
		out = append(out, x.admit("a closed breaker lets every call through, however many are still out"))
	}
	x.expectState(Closed, "50 calls still out, not reported: nothing to judge yet")
	for i, done := range out {
		x.report(done, true, fmt.Sprintf("call %d of 50", i+1))
	}
	x.expectState(Closed, "50 more successes")
}

func (s *suite) opensOnFailureRatio(t *testing.T) {
	x := s.breaker(t, Settings{Window: 10, FailureRatio: 0.5, MinCalls: 4, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("SFSF", "CCCC", "2 failures of 4 is 50%, not more than FailureRatio=0.5: stay closed")
	x.sequence("F", "O", "3 failures of 5 is 60%, more than FailureRatio=0.5: open")

	x = s.breaker(t, Settings{Window: 8, FailureRatio: 0.25, MinCalls: 8, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("SSSSSSFF", "CCCCCCCC", "2 failures of 8 is 25%, not more than FailureRatio=0.25: stay closed")
	x.sequence("F", "O", "the window of 8 drops its oldest success and holds 3 failures of 8, 37.5% > 25%: open")

	x = s.breaker(t, Settings{Window: 4, FailureRatio: 0.75, MinCalls: 4, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("FFFS", "CCCC", "3 failures of 4 is 75%, not more than FailureRatio=0.75: stay closed")
	x.sequence("FFF", "CCC", "the window of 4 keeps holding 3 failures of 4 as it slides: stay closed")
	x.sequence("F", "O", "4 failures of 4 is 100%, more than 75%: open")

	// At random: a ratio of 64ths and a window whose failed share is just
	// above it, within the same whole percent, so that rounding either to
	// a whole percent (or to any coarser step) says "not more".
	rng := suitekit.Rand(t)
	for found := 0; found < 3; {
		j := 1 + rng.IntN(63)
		ratio := float64(j) / 64
		c := 8 + rng.IntN(57)
		f := int(ratio*float64(c)) + 1 // the fewest failures of c above the ratio
		share := float64(f) / float64(c)
		if f > c || math.Floor(share*100) != math.Floor(ratio*100) {
			continue
		}
		found++
		x = s.breaker(t, Settings{Window: c, FailureRatio: ratio, MinCalls: c, Cooldown: time.Minute, HalfOpenMax: 1})
		x.sequence(strings.Repeat("S", c-f)+strings.Repeat("F", f), strings.Repeat("C", c-1)+"O",
			fmt.Sprintf("%d failures of %d is %.4f%%, more than FailureRatio=%v = %.4f%%: open (compare the exact share, not whole percents)",
				f, c, 100*share, ratio, 100*ratio))
		f--
		x = s.breaker(t, Settings{Window: c, FailureRatio: ratio, MinCalls: c, Cooldown: time.Minute, HalfOpenMax: 1})
		x.sequence(strings.Repeat("S", c-f)+strings.Repeat("F", f), strings.Repeat("C", c),
			fmt.Sprintf("%d failures of %d is %.4f%%, not more than FailureRatio=%v: stay closed", f, c, 100*float64(f)/float64(c), ratio))
	}
}

func (s *suite) respectsMinCalls(t *testing.T) {
	x := s.breaker(t, Settings{Window: 10, FailureRatio: 0.5, MinCalls: 5, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("FFFF", "CCCC", "every call failed, but 4 outcomes are fewer than MinCalls=5: no verdict yet, stay closed")
	x.sequence("F", "O", "5 outcomes reach MinCalls=5, and 5 failures of 5 is more than 50%: open")

	x = s.breaker(t, Settings{Window: 20, FailureRatio: 0.25, MinCalls: 12, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("FSSSSFSSSSF", "CCCCCCCCCCC", "3 failures of 11 is 27%, more than 25%, but 11 outcomes are fewer than MinCalls=12: stay closed")
	x.sequence("S", "C", "12 outcomes reach MinCalls=12, and 3 failures of 12 is exactly 25%: stay closed")
	x.sequence("F", "O", "4 failures of 13 is 31%, more than 25%: open")

	// The verdict comes after every outcome, a success included.
	x = s.breaker(t, Settings{Window: 10, FailureRatio: 0.5, MinCalls: 4, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("FFF", "CCC", "3 outcomes are fewer than MinCalls=4")
	x.sequence("S", "O", "the success brings the window to MinCalls=4, and 3 failures of 4 is 75%: "+
		"judge the window after every outcome, not only after failures")
}

func (s *suite) slidingWindow(t *testing.T) {
	// Old failures leave the window: a breaker that counts every outcome
	// since it closed would open at the seventh call.
	x := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 4, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence("FFSSSFF", "CCCCCCC",
		"the window holds only the last 4 outcomes: after FFSSSFF it is SSFF, 2 failures of 4, not more than 50%; "+
			"counting all 7 calls (4 failures) would be wrong")
	x.sequence("SF", "CO", "after S the window is SFFS (50%), after F it is FFSF: 3 of 4 failed")

	// A long run of successes must not dilute new failures for ever.
	x = s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 4, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence(strings.Repeat("S", 40)+"FF", strings.Repeat("C", 42), "the window is SSFF: 2 failures of 4")
	x.sequence("F", "O", "the window is SFFF: 3 failures of 4, more than 50%, however many successes came before it")

	// A large window, of random size, remembers its oldest outcomes: more
	// than half of them failures, then a long run of successes.
	w := 130 + suitekit.Rand(t).IntN(171)
	f := w/2 + 1
	x = s.breaker(t, Settings{Window: w, FailureRatio: 0.5, MinCalls: w, Cooldown: time.Minute, HalfOpenMax: 1})
	x.sequence(strings.Repeat("F", f)+strings.Repeat("S", w-f), strings.Repeat("C", w-1)+"O",
		fmt.Sprintf("Window=%d outcomes, of which the first %d failed: %d of %d is more than 50%%; keep all Window outcomes, however many", w, f, f, w))

	modelRuns(t, s)
}

// modelRuns drives fresh breakers with random outcomes and checks every state
// against a plain model of the window: a list of the last Window outcomes.
// The ratios are exact binary fractions, so no rounding can make a correct
// breaker disagree with the model.
func modelRuns(t *testing.T, s *suite) {
	t.Helper()
	rng := suitekit.Rand(t)
	windows := []int{1, 2, 3, 4, 5, 8, 10, 16, 20, 1 + rng.IntN(64), 65 + rng.IntN(200)}
	ratios := []float64{0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875}
	shares := []float64{0.05, 0.2, 0.35, 0.5, 0.65, 0.9}
	for run := range 200 {
		cfg := Settings{Cooldown: time.Minute, HalfOpenMax: 1}
		cfg.Window = windows[rng.IntN(len(windows))]
		cfg.MinCalls = 1 + rng.IntN(cfg.Window)
		cfg.FailureRatio = ratios[rng.IntN(len(ratios))]
		share := shares[rng.IntN(len(shares))]
		x := s.breaker(t, cfg)
		var window []bool // true for a failure, oldest first
		var outcomes strings.Builder
		for step := range 80 + 2*cfg.Window {
			success := rng.Float64() >= share
			x.report(x.admit(fmt.Sprintf("random run %d: the model says the breaker is still closed", run)), success,
				fmt.Sprintf("call %d", step+1))
			outcomes.WriteByte("FS"[b2i(success)])
			window = append(window, !success)
			if len(window) > cfg.Window {
				window = window[1:]
			}
			failures := 0
			for _, f := range window {
				failures += b2i(f)
			}
			want := Closed
			if len(window) >= cfg.MinCalls && float64(failures) > cfg.FailureRatio*float64(len(window)) {
				want = Open
			}
			if got := x.state(); got != want {
				t.Fatalf("random run %d with settings %+v: after outcomes %s, State() = %v; want %v\n"+
					"the last %d outcomes hold %d failures: open only when they are at least MinCalls=%d "+
					"and more than FailureRatio=%v of them failed",
					run, cfg, outcomes.String(), got, want, len(window), failures, cfg.MinCalls, cfg.FailureRatio)
			}
			if want == Open {
				break
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *suite) failsFastWhileOpen(t *testing.T) {
	x := s.breaker(t, Settings{Window: 10, FailureRatio: 0.5, MinCalls: 5, Cooldown: time.Minute, HalfOpenMax: 1})
	x.trip(5, "")
	// A thousand refusals spread over the minute, the last 1 ns before its
	// end: none may restart the cooldown or sneak a call through.
	for i := range 1000 {
		x.refuse(fmt.Sprintf("refusal %d of 1000 while open: Allow must fail fast with a nil done and ErrOpen (compare with errors.Is)", i+1))
		if i%100 == 99 {
			x.expectState(Open, "the breaker stays open for the whole Cooldown=1m")
		}
		if i < 999 {
			time.Sleep(59 * time.Millisecond)
		}
	}
	time.Sleep(time.Minute - 999*59*time.Millisecond - 1)
	x.refuse("1ns before the cooldown ends the breaker is still open")
	time.Sleep(time.Nanosecond)
	x.admit("Cooldown=1m after opening the breaker is half-open and lets a trial through; " +
		"refused calls must not restart the cooldown")
}

func (s *suite) cooldownExact(t *testing.T) {
	// A cooldown drawn at random, to the nanosecond, between 1s and 2m,
	// and a random delay between letting the call through and its failure.
	rng := suitekit.Rand(t)
	cooldown := time.Second + time.Duration(rng.Int64N(int64(2*time.Minute)))
	slow := time.Duration(rng.Int64N(int64(10 * time.Second)))
	cfg := Settings{Window: 4, FailureRatio: 0.5, MinCalls: 1, Cooldown: cooldown, HalfOpenMax: 1}

	// The cooldown starts when the failure that tips the breaker is
	// reported, not when its call was let through.
	x := s.breaker(t, cfg)
	done := x.admit("a new breaker is closed")
	time.Sleep(slow)
	x.report(done, false, "a call let through at t=0s")
	x.expectState(Open, fmt.Sprintf("one failure of one call, with MinCalls=1, is more than 50%%: open at t=%v", slow))
	time.Sleep(cooldown - 1)
	x.expectState(Open, fmt.Sprintf("1ns before Cooldown=%v has passed since the breaker opened at t=%v, it is still open", cooldown, slow))
	x.refuse("1ns before the end of the cooldown Allow still fails fast")
	time.Sleep(time.Nanosecond)
	x.expectState(HalfOpen, fmt.Sprintf("exactly Cooldown=%v after opening, State reports half-open, even before any Allow "+
		"(work the transition out from time.Now in State too, to the nanosecond)", cooldown))
	x.admit("half-open: the first trial call goes through")

	// The same, asking Allow first: it must not depend on State having
	// been called.
	x = s.breaker(t, cfg)
	x.trip(1, "")
	time.Sleep(cooldown - 1)
	x.refuse("1ns before the end of the cooldown Allow still fails fast")
	time.Sleep(time.Nanosecond)
	x.admit(fmt.Sprintf("exactly Cooldown=%v after opening, Allow lets a trial call through without State being called "+
		"(work the transition out from time.Now in Allow)", cooldown))
	x.expectState(HalfOpen, "with a trial call out the breaker is half-open")

	// Nothing happens at the end of a cooldown nobody asks about: long
	// after, the breaker is half-open, not closed.
	x = s.breaker(t, cfg)
	x.trip(1, "")
	later := cooldown + time.Duration(rng.Int64N(int64(48*time.Hour)))
	time.Sleep(later)
	x.expectState(HalfOpen, fmt.Sprintf("%v after opening, with no call since, the breaker is half-open: only trial calls close it", later))
}

func (s *suite) halfOpenLimit(t *testing.T) {
	rng := suitekit.Rand(t)
	most := 2 + rng.IntN(15) // HalfOpenMax, at random
	x := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 1, Cooldown: time.Second, HalfOpenMax: most})
	x.trip(1, "")
	time.Sleep(time.Second)

	// Many goroutines ask at the same instant; exactly HalfOpenMax may go.
	goroutines := 3*most + 10 + rng.IntN(50)
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		mu     sync.Mutex
		trials []func(bool)
		other  []string
		panics []string
	)
	for g := range goroutines {
		wg.Go(func() {
			<-start
			var done func(bool)
			var err error
			if r, stack := suitekit.Catch(func() { done, err = x.b.Allow() }); r != nil {
				mu.Lock()
				panics = append(panics, suitekit.PanicReport(fmt.Sprintf("Allow() in goroutine %d", g), r, stack))
				mu.Unlock()
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && done != nil:
				trials = append(trials, done)
			case errors.Is(err, x.impl.ErrOpen) && done == nil:
			default:
				other = append(other, fmt.Sprintf("(%s, %v)", doneString(done), err))
			}
		})
	}
	close(start)
	wg.Wait()
	if len(panics) > 0 {
		t.Fatal(panics[0])
	}
	if len(other) > 0 {
		t.Fatalf("half-open, %d goroutines calling Allow() at once: got %s; want (done, nil) or (nil, ErrOpen)", goroutines, other[0])
	}
	if len(trials) != most {
		t.Fatalf("half-open with HalfOpenMax=%d, %d goroutines calling Allow() at once: %d let through; want exactly %d\n"+
			"count a trial when Allow lets it through, under the same lock as the check", most, goroutines, len(trials), most)
	}
	x.refuse(fmt.Sprintf("%d trials are out and HalfOpenMax=%d: the next call must fail fast", most, most))
	x.expectState(HalfOpen, fmt.Sprintf("%d trials out, none reported", most))

	// A trial that succeeds frees its slot; the limit is on trials at once.
	x.report(trials[0], true, "trial 1")
	x.expectState(HalfOpen, fmt.Sprintf("1 success of the %d needed to close", most))
	trials = append(trials[1:], x.admit(fmt.Sprintf("trial 1 succeeded: %d trials are out, so one more may go", most-1)))
	x.refuse(fmt.Sprintf("%d trials are out again", most))
	time.Sleep(time.Hour)
	x.refuse("time does not free a trial slot; only done does")

	// Sequentially, with the default of one trial.
	y := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 1, Cooldown: time.Second, HalfOpenMax: 1})
	y.trip(1, "")
	time.Sleep(time.Second)
	y.admit("half-open: the one trial call allowed by HalfOpenMax=1")
	for range 10 {
		y.refuse("half-open with HalfOpenMax=1 and its trial out: every other call fails fast")
	}
}

func (s *suite) halfOpenSuccessCloses(t *testing.T) {
	cfg := Settings{Window: 4, FailureRatio: 0.5, MinCalls: 2, Cooldown: 10 * time.Second, HalfOpenMax: 1}
	x := s.breaker(t, cfg)
	x.trip(2, "")
	time.Sleep(cfg.Cooldown)
	x.report(x.admit("half-open: one trial"), true, "the trial")
	x.expectState(Closed, "the one trial of HalfOpenMax=1 succeeded: close")
	// The window starts empty: neither the failures that opened the
	// breaker nor the trial belong in it.
	x.sequence("FSF", "CCO", "after closing, the window must be empty: then F alone is fewer than MinCalls=2, "+
		"FS is 1 failure of 2 (50%) and FSF is 2 of 3, more than 50%")

	// HalfOpenMax=3: three successes close it, and waiting changes nothing.
	cfg.HalfOpenMax = 3
	x = s.breaker(t, cfg)
	x.trip(2, "")
	time.Sleep(cfg.Cooldown)
	a := x.admit("half-open with HalfOpenMax=3: trial 1")
	b := x.admit("half-open with HalfOpenMax=3: trial 2")
	c := x.admit("half-open with HalfOpenMax=3: trial 3")
	time.Sleep(time.Hour)
	x.expectState(HalfOpen, "3 trials out for an hour: no time limit applies while half-open, only outcomes move it")
	x.report(a, true, "trial 1")
	x.expectState(HalfOpen, "1 success of the HalfOpenMax=3 needed")
	x.report(b, true, "trial 2")
	x.expectState(HalfOpen, "2 successes of the HalfOpenMax=3 needed")
	x.report(c, true, "trial 3")
	x.expectState(Closed, "HalfOpenMax=3 successes and no failure: close")
	x.sequence("FSF", "CCO", "after closing, the window must be empty")

	// Trials one after the other count towards the same total.
	cfg.HalfOpenMax = 2
	x = s.breaker(t, cfg)
	x.trip(2, "")
	time.Sleep(cfg.Cooldown)
	x.report(x.admit("half-open with HalfOpenMax=2: trial 1"), true, "trial 1")
	x.expectState(HalfOpen, "1 success of the HalfOpenMax=2 needed")
	x.report(x.admit("trial 1 is back, so a slot is free: trial 2"), true, "trial 2")
	x.expectState(Closed, "2 successes, one after the other, close a breaker with HalfOpenMax=2")
}

func (s *suite) halfOpenFailureReopens(t *testing.T) {
	const cooldown = 10 * time.Second
	x := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 2, Cooldown: cooldown, HalfOpenMax: 2})
	x.trip(2, "")
	time.Sleep(cooldown)
	a := x.admit("half-open with HalfOpenMax=2: trial 1")
	b := x.admit("half-open with HalfOpenMax=2: trial 2")
	x.report(a, true, "trial 1")
	x.expectState(HalfOpen, "1 success of the 2 needed")
	time.Sleep(3 * time.Second)
	x.report(b, false, "trial 2")
	x.expectState(Open, "a trial failed: open again at once, even though another trial succeeded")
	x.refuse("open again: fail fast")
	time.Sleep(cooldown - 1)
	x.refuse("the new cooldown is a full Cooldown=10s from the failed trial: 1ns before its end, still open")
	time.Sleep(time.Nanosecond)
	c := x.admit("Cooldown=10s after the failed trial: half-open again")
	d := x.admit("half-open again with HalfOpenMax=2: a second trial")
	x.report(c, false, "trial 3")
	x.expectState(Open, "the first trial to report failed: open at once, without waiting for the other trial")
	x.report(d, true, "trial 4, let through before the breaker reopened")
	x.expectState(Open, "a trial let through before the breaker reopened reports too late: ignore it, stay open")
	x.refuse("still open")
	time.Sleep(cooldown)
	e := x.admit("half-open once more: the trial slots start empty")
	f := x.admit("half-open once more: the trial slots start empty, so HalfOpenMax=2 trials may go")
	x.refuse("2 trials out")
	x.report(e, true, "trial 5")
	x.report(f, true, "trial 6")
	x.expectState(Closed, "2 successes of this half-open spell close the breaker")
}

func (s *suite) staleOutcomesIgnored(t *testing.T) {
	const cooldown = 10 * time.Second
	x := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 2, Cooldown: cooldown, HalfOpenMax: 2})
	// Six slow calls let through while closed, still out when it opens.
	var slow [6]func(bool)
	for i := range slow {
		slow[i] = x.admit("a new breaker is closed")
	}
	x.trip(2, "")

	// While open.
	x.report(slow[0], false, "slow call 1, let through while closed")
	x.expectState(Open, "an outcome of a call let through before the breaker opened changes nothing")
	time.Sleep(cooldown / 2)
	x.report(slow[1], false, "slow call 2, let through while closed")
	time.Sleep(cooldown/2 - 1)
	x.refuse("a stale failure reported while open must not restart the cooldown: still open 1ns before its end")
	time.Sleep(time.Nanosecond)
	x.expectState(HalfOpen, "Cooldown=10s after opening: half-open, whatever stale outcomes arrived meanwhile")

	// While half-open.
	t1 := x.admit("half-open with HalfOpenMax=2: trial 1")
	t2 := x.admit("half-open with HalfOpenMax=2: trial 2")
	x.report(slow[2], true, "slow call 3, let through while closed")
	x.expectState(HalfOpen, "a stale success is not a trial success: still half-open")
	x.refuse("a stale success must not free a trial slot: 2 trials are still out")
	x.report(slow[3], false, "slow call 4, let through while closed")
	x.expectState(HalfOpen, "a stale failure is not a failed trial: still half-open")
	x.report(t1, true, "trial 1")
	t3 := x.admit("trial 1 succeeded: a slot is free")
	x.report(t2, true, "trial 2")
	x.expectState(Closed, "2 trial successes, and the stale success did not count: close")

	// Closed again: nothing from before may land in the new window.
	x.report(t3, false, "trial 3, let through while half-open")
	x.report(slow[4], false, "slow call 5, let through while closed the first time")
	x.report(slow[5], false, "slow call 6, let through while closed the first time")
	x.expectState(Closed, "three stale failures must not land in the new window (MinCalls=2 would open it)")
	x.sequence("SFF", "CCO", "the new window holds only calls let through since it closed: S, SF (50%), SFF (67%)")
}

func (s *suite) doneTwiceIgnored(t *testing.T) {
	const cooldown = 10 * time.Second
	x := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 2, Cooldown: cooldown, HalfOpenMax: 2})
	x.sequence("S", "C", "")
	done := x.admit("closed")
	x.report(done, false, "call 2")
	x.report(done, false, "call 2 again")
	x.report(done, false, "call 2 a third time")
	x.expectState(Closed, "only the first call of a done counts: the window is SF, 50%, not SFFF")
	done = x.admit("closed")
	x.report(done, true, "call 3")
	x.report(done, false, "call 3 again, changing its mind")
	x.expectState(Closed, "the second call of a done is ignored even with another outcome: the window is SFS")
	x.sequence("F", "C", "the window is SFSF: 50%")
	x.sequence("F", "O", "the window is FSFF: 75%")

	time.Sleep(cooldown)
	a := x.admit("half-open with HalfOpenMax=2: trial 1")
	x.report(a, true, "trial 1")
	x.report(a, true, "trial 1 again")
	x.expectState(HalfOpen, "one trial succeeded, twice reported: 1 success of the 2 needed, not 2")
	b := x.admit("trial 1 is back: one slot free")
	c := x.admit("trial 1 is back: two slots free")
	x.refuse("trials 2 and 3 are out; reporting trial 1 twice must not have freed a third slot")
	x.report(b, false, "trial 2")
	x.report(b, true, "trial 2 again")
	x.expectState(Open, "trial 2 failed: open; its second report must not undo that")
	x.report(c, true, "trial 3")
	x.expectState(Open, "trial 3 reports after the breaker reopened: ignored")
}

func (s *suite) defaultSettings(t *testing.T) {
	rng := suitekit.Rand(t)
	for _, cfg := range []Settings{
		{},
		{Window: -1, FailureRatio: -0.5, MinCalls: -3, Cooldown: -time.Second, HalfOpenMax: -2},
		{FailureRatio: math.NaN()},
		{FailureRatio: 1},
		{FailureRatio: 1.5},
		// And invalid values drawn at random.
		{
			Window:       -rng.IntN(1 << 20),
			FailureRatio: []float64{1 + rng.Float64()*1e6, -rng.Float64(), math.Inf(1), math.Inf(-1)}[rng.IntN(4)],
			MinCalls:     -rng.IntN(1 << 20),
			Cooldown:     -time.Duration(rng.Int64N(int64(time.Hour))),
			HalfOpenMax:  -rng.IntN(1 << 20),
		},
	} {
		why := fmt.Sprintf("settings %+v mean the defaults: Window=20, FailureRatio=0.5, MinCalls=10, Cooldown=30s, HalfOpenMax=1", cfg)
		x := s.breaker(t, cfg)
		x.sequence(strings.Repeat("S", 20)+strings.Repeat("F", 10), strings.Repeat("C", 30),
			why+"\n10 failures in the last 20 outcomes is 50%: stay closed")
		x.sequence("F", "O", why+"\nthe window of 20 now holds 11 failures: open")

		x = s.breaker(t, cfg)
		x.sequence("FFFFFFFFF", "CCCCCCCCC", why+"\n9 outcomes are fewer than MinCalls=10")
		x.sequence("F", "O", why+"\n10 failures of 10")
		time.Sleep(30*time.Second - 1)
		x.refuse(why + "\n1ns before Cooldown=30s has passed")
		time.Sleep(time.Nanosecond)
		trial := x.admit(why + "\nCooldown=30s has passed: half-open")
		x.refuse(why + "\nHalfOpenMax=1 trial is out")
		x.report(trial, true, "the trial")
		x.expectState(Closed, why+"\nHalfOpenMax=1 success closes")
	}

	// MinCalls above Window would never be reached: it means Window.
	x := s.breaker(t, Settings{Window: 4, FailureRatio: 0.5, MinCalls: 50, Cooldown: time.Second, HalfOpenMax: 1})
	x.sequence("FFFF", "CCCO", "MinCalls=50 is more than Window=4, so it means 4: 4 failures of 4 open the breaker")
}

func (s *suite) concurrent(t *testing.T) {
	// No lost updates: 200 failures reported from 8 goroutines at once
	// must all land in a window of 200 and open it on the last one. A
	// window updated without a lock loses some (and -race reports it).
	for round := range 8 {
		x := s.breaker(t, Settings{Window: 200, FailureRatio: 0.5, MinCalls: 200, Cooldown: time.Second, HalfOpenMax: 4})
		var refused atomic.Int64
		suitekit.Hammer(t, 8, "a call", func(int) {
			for range 25 {
				done, err := x.b.Allow()
				if err != nil {
					refused.Add(1)
					continue
				}
				done(false)
			}
		})
		if n := refused.Load(); n != 0 {
			t.Fatalf("round %d: 8 goroutines × 25 calls on a closed breaker with MinCalls=200: %d refused; want 0\n"+
				"the breaker cannot open before 200 outcomes are in", round, n)
		}
		x.expectState(Open, fmt.Sprintf("round %d: 8 goroutines reported 200 failures at once into a window of 200; "+
			"if it is not open, some outcomes were lost: guard the window with a mutex", round))
	}

	// Everything at once: Allow, done (sometimes twice), State, with fake
	// time passing, through many transitions.
	cfg := Settings{Window: 10, FailureRatio: 0.5, MinCalls: 5, Cooldown: 100 * time.Millisecond, HalfOpenMax: 2}
	x := s.breaker(t, cfg)
	var bad atomic.Value // string: the first wrong answer
	seed := suitekit.Rand(t).Uint64()
	suitekit.Hammer(t, 8, "a call", func(g int) {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		for range 400 {
			if st := x.impl.State(x.b); st < Closed || st > HalfOpen {
				bad.CompareAndSwap(nil, fmt.Sprintf("State() = %v; want closed, open or half-open", st))
			}
			done, err := x.b.Allow()
			switch {
			case err == nil && done != nil:
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				ok := rng.IntN(10) >= 4
				done(ok)
				if rng.IntN(5) == 0 {
					done(!ok)
				}
			case errors.Is(err, x.impl.ErrOpen) && done == nil:
				time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			default:
				bad.CompareAndSwap(nil, fmt.Sprintf("Allow() = (%s, %v); want (done, nil) or (nil, ErrOpen)", doneString(done), err))
			}
		}
	})
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	time.Sleep(cfg.Cooldown)
	x.admit("every call has reported and a full Cooldown has passed: whatever the state, a call must go through " +
		"(if not, a trial slot leaked under concurrency)")
}

func (s *suite) stateString(t *testing.T) {
	for _, tt := range []struct {
		s    State
		want string
	}{
		{Closed, "closed"},
		{Open, "open"},
		{HalfOpen, "half-open"},
		{3, "State(3)"},
		{-1, "State(-1)"},
		{42, "State(42)"},
	} {
		var got string
		if r, stack := suitekit.Catch(func() { got = s.impl.String(tt.s) }); r != nil {
			t.Fatal(suitekit.PanicReport(fmt.Sprintf("State(%d).String()", int(tt.s)), r, stack))
		}
		if got != tt.want {
			t.Errorf("State(%d).String() = %q; want %q", int(tt.s), got, tt.want)
		}
	}
}
