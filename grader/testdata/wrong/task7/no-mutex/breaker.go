// WRONG (task 7, no-mutex): Allow, State and done take no lock, so concurrent callers lose outcomes and race on the window; caught by Concurrent.

// Package breaker provides a circuit breaker: a guard around calls to a
// dependency that, once too many recent calls have failed, stops making them
// for a while and fails at once instead.
package breaker

import (
	"errors"
	"strconv"
	"sync"
	"time"
)

// Task 7 goal: build a circuit breaker that judges the last few outcomes,
// fails fast while the dependency looks down, lets a few trial calls through
// after a cooldown, and ignores news that arrives too late to matter.
//
// This is the reference solution. Where the exercise has a TODO(task7), it
// has a short explanation instead.

// A State is where a Breaker is in its cycle: Closed, Open or HalfOpen.
type State int

// The states of a Breaker. The tests rely on these names and values.
const (
	// Closed is the normal state: every call goes through and its outcome
	// joins the window of recent outcomes.
	Closed State = iota
	// Open fails every call at once with ErrOpen, until the cooldown has
	// passed.
	Open
	// HalfOpen lets a few trial calls through to find out whether the
	// dependency has recovered; the others fail with ErrOpen.
	HalfOpen
)

// String returns "closed", "open" or "half-open", and "State(n)" for any
// other value n.
func (s State) String() string {
	// The names a log line or a metric label wants; anything else prints
	// its number the way the stringer tool would, so a bad value is visible
	// rather than disguised as a real state.
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// ErrOpen is the error Allow returns when the call must not be made: the
// breaker is open, or half-open with all its trial calls already out.
// Callers compare with errors.Is and fail fast or serve a fallback.
var ErrOpen = errors.New("breaker: circuit open, failing fast")

// The defaults NewBreaker uses for settings that are zero or invalid.
const (
	DefaultWindow       = 20               // outcomes
	DefaultFailureRatio = 0.5              // share of the window
	DefaultMinCalls     = 10               // outcomes
	DefaultCooldown     = 30 * time.Second // time open before trial calls
	DefaultHalfOpenMax  = 1                // trial calls at once
)

// BreakerSettings configures a Breaker. Every field has a default, used when
// the field is zero or invalid, so the zero value is a sensible breaker.
type BreakerSettings struct {
	// Window is how many of the most recent outcomes a closed breaker
	// judges, counted in calls, not in time. Zero or less means
	// DefaultWindow (20).
	Window int

	// FailureRatio is the share of failed calls in the window, between 0
	// and 1, that the breaker tolerates: it opens when more than this
	// share failed. A value outside (0, 1), or NaN, means
	// DefaultFailureRatio (0.5). To open on any failure, use a tiny ratio
	// such as 1e-9.
	FailureRatio float64

	// MinCalls is how many outcomes the window must hold before the
	// breaker judges it at all, so that one failure out of one call does
	// not open it. Zero or less means DefaultMinCalls (10); more than
	// Window means Window, or the breaker could never open.
	MinCalls int

	// Cooldown is how long an open breaker fails fast before it turns
	// half-open and lets trial calls through. Zero or less means
	// DefaultCooldown (30 s).
	Cooldown time.Duration

	// HalfOpenMax is how many trial calls a half-open breaker lets through
	// at once, and how many of them must succeed, with none failing, to
	// close it again. Zero or less means DefaultHalfOpenMax (1).
	HalfOpenMax int
}

// withDefaults returns s with every zero or invalid field replaced by its
// default.
func (s BreakerSettings) withDefaults() BreakerSettings {
	if s.Window <= 0 {
		s.Window = DefaultWindow
	}
	if !(s.FailureRatio > 0 && s.FailureRatio < 1) { // also catches NaN
		s.FailureRatio = DefaultFailureRatio
	}
	if s.MinCalls <= 0 {
		s.MinCalls = DefaultMinCalls
	}
	s.MinCalls = min(s.MinCalls, s.Window)
	if s.Cooldown <= 0 {
		s.Cooldown = DefaultCooldown
	}
	if s.HalfOpenMax <= 0 {
		s.HalfOpenMax = DefaultHalfOpenMax
	}
	return s
}

// A Breaker guards calls to one dependency. It starts Closed and lets every
// call through, keeping the outcomes of the last Window of them. It judges
// the window after every outcome: once it holds at least MinCalls outcomes
// and more than FailureRatio of them are failures, the breaker opens. For
// Cooldown, counted from the outcome that tipped it, Allow then fails at
// once with ErrOpen. After that the breaker is HalfOpen and lets up to
// HalfOpenMax trial calls through at once. HalfOpenMax successes close it
// again with an empty window; a single failure opens it for another
// Cooldown.
//
// Allow is the only way in: it says whether to make the call and returns a
// done function to report how the call went. Nothing runs in the background:
// each call to Allow, State or done works out from time.Now whether the
// cooldown is over.
//
// Every transition starts a new generation. An outcome reported for a call
// that was let through in an earlier generation, such as a slow call from
// before the breaker opened, is ignored: it describes a past that the
// breaker has already judged.
//
// A Breaker must be made with NewBreaker. It is safe for concurrent use by
// multiple goroutines.
type Breaker struct {
	cfg BreakerSettings // set by NewBreaker, read-only afterwards

	mu    sync.Mutex
	state State  // guarded by mu
	gen   uint64 // guarded by mu; incremented by every transition

	// Closed: the last len(window) outcomes in a ring, true for a failure.
	window   []bool // guarded by mu
	next     int    // guarded by mu; the slot the next outcome goes in
	calls    int    // guarded by mu; outcomes in the window
	failures int    // guarded by mu; failures in the window

	// Open: when the cooldown ends.
	until time.Time // guarded by mu

	// HalfOpen: trial calls let through and not yet reported, and trial
	// calls that succeeded.
	trials, passed int // guarded by mu
}

// NewBreaker returns a closed Breaker with an empty window, configured by s;
// zero or invalid fields of s get the defaults documented on
// BreakerSettings.
func NewBreaker(s BreakerSettings) *Breaker {
	// The defaults are applied once, here, so the rest of the code can
	// trust every setting. The ring is allocated once too: the window never
	// changes size.
	cfg := s.withDefaults()
	return &Breaker{cfg: cfg, state: Closed, window: make([]bool, cfg.Window)}
}

// Allow reports whether a call may be made now. If it may, err is nil and
// the caller must make the call and then call done exactly once, with true
// if the call succeeded and false if it failed. If not, Allow returns a nil
// done and ErrOpen, and the caller should fail fast without calling the
// dependency.
//
// done is safe to call from any goroutine. Calls after the first do
// nothing, and so does the first if the breaker has changed state since
// Allow let the call through. A half-open breaker keeps a trial slot for
// every call it let through until its done is called, so a caller that
// never calls done keeps it from closing.
func (b *Breaker) Allow() (done func(success bool), err error) {
	// Read the clock before locking, to keep the critical section short.
	// A goroutine that loses the race for the lock then brings a time a
	// little older than one already used. That is harmless: the only
	// comparison, with the end of the cooldown, merely sees an open
	// breaker as open a moment longer.
	now := time.Now()
	b.advance(now)
	switch b.state {
	case Open:
		return nil, ErrOpen
	case HalfOpen:
		// The slot is taken now, not when the call ends, so that no more
		// than HalfOpenMax trials are ever out at once.
		if b.trials >= b.cfg.HalfOpenMax {
			return nil, ErrOpen
		}
		b.trials++
	}
	return b.doneFunc(b.gen), nil
}

// State returns the state the breaker is in now. An open breaker whose
// cooldown is over reports HalfOpen, even if no call has come since.
func (b *Breaker) State() State {
	// The same lazy step as Allow: State never reports an Open that Allow
	// would already treat as HalfOpen.
	now := time.Now()
	b.advance(now)
	return b.state
}

// doneFunc returns the done function of a call let through in generation
// gen.
func (b *Breaker) doneFunc(gen uint64) func(success bool) {
	// called lives in the closure, one per call, and is read and written
	// only under b.mu, so two racing calls of the same done count once.
	called := false
	return func(success bool) {
		now := time.Now()
		if called {
			return
		}
		called = true
		// Any transition since Allow makes the outcome stale: the window it
		// belonged to is gone, or the trial slot it held was freed when the
		// breaker opened or closed. No timed transition can be pending here:
		// only an open breaker has one, and an open breaker lets no call
		// through, so gen would not match.
		if gen != b.gen {
			return
		}
		b.record(now, success)
	}
}

// record counts the outcome of a call of the current generation at now.
func (b *Breaker) record(now time.Time, success bool) {
	switch b.state {
	case Closed:
		// The ring drops the oldest outcome once it is full, so the counts
		// always describe exactly the last len(window) calls.
		if b.calls == len(b.window) {
			if b.window[b.next] {
				b.failures--
			}
		} else {
			b.calls++
		}
		b.window[b.next] = !success
		if !success {
			b.failures++
		}
		b.next = (b.next + 1) % len(b.window)
		// Judge after every outcome, a success included: the success that
		// brings the window up to MinCalls can reveal a share that was
		// already too high. "More than" the ratio: half failing, with a
		// ratio of 0.5, stays closed. Dividing, rather than multiplying
		// the ratio by calls, keeps 3 of 10 equal to a ratio written 0.3.
		if b.calls >= b.cfg.MinCalls && float64(b.failures)/float64(b.calls) > b.cfg.FailureRatio {
			b.setState(Open, now)
		}
	case HalfOpen:
		b.trials--
		if !success {
			b.setState(Open, now)
			return
		}
		b.passed++
		if b.passed >= b.cfg.HalfOpenMax {
			b.setState(Closed, now)
		}
	}
}

// advance makes the one transition that time alone causes: an open breaker
// whose cooldown ended at or before now becomes half-open.
func (b *Breaker) advance(now time.Time) {
	if b.state == Open && !now.Before(b.until) {
		b.setState(HalfOpen, now)
	}
}

// setState moves the breaker to st at now, starts a new generation, and
// resets what st keeps track of.
func (b *Breaker) setState(st State, now time.Time) {
	b.state = st
	b.gen++
	switch st {
	case Closed:
		clear(b.window)
		b.next, b.calls, b.failures = 0, 0, 0
	case Open:
		// A huge Cooldown cannot wrap round into the past: Time.Add
		// saturates rather than overflows.
		b.until = now.Add(b.cfg.Cooldown)
	case HalfOpen:
		b.trials, b.passed = 0, 0
	}
}
