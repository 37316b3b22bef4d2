// Package breaker provides a circuit breaker: a guard around calls to a
// dependency that, once too many recent calls have failed, stops making them
// for a while and fails at once instead.
package breaker

import (
	"errors"
	"time"

	"ratelab/lab"
)

// Task 7 goal: build a circuit breaker that judges the last few outcomes,
// fails fast while the dependency looks down, lets a few trial calls through
// after a cooldown, and ignores news that arrives too late to matter.
//
// Fill in every TODO(task7) below, then run
//
//	go test -tags exercises ./exercises/breaker
//
// The tests are shared with the reference solution; do not edit them. Read
// the clock with time.Now(): the tests run in a testing/synctest bubble, where
// time is fake and time.Sleep returns at once, so a 30 s cooldown is checked
// to the nanosecond in no real time.
//
// Given, because they are the contract rather than the lesson: the State type
// and its constants, ErrOpen, the Default constants and BreakerSettings. Keep
// their names and values; the tests rely on them. Everything else is yours:
// String, the fields of Breaker, NewBreaker, Allow and State. You may add
// private types, functions and methods, such as one advance(now time.Time)
// that makes the one transition time alone causes, and one setState that
// every transition goes through.

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
	// Goal: names for log lines and messages.
	// TODO(task7): return the three names, and "State(7)" for a value that
	// is none of them (strconv.Itoa or fmt.Sprintf will do).
	lab.NotImplemented(7, "State.String")
	return ""
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
	// Goal: the state of one breaker, and what protects it.
	// TODO(task7): choose the fields. You need the settings with their
	// defaults applied, a mutex, the state, a generation counter, a window
	// of the last Window outcomes (a ring of Window booleans with a count
	// of calls and of failures is enough), when the cooldown ends, and how
	// many trial calls are out and how many have succeeded.
}

// NewBreaker returns a closed Breaker with an empty window, configured by s;
// zero or invalid fields of s get the defaults documented on
// BreakerSettings.
func NewBreaker(s BreakerSettings) *Breaker {
	// Goal: a closed breaker whose every setting can be trusted.
	// TODO(task7): apply the defaults field by field (mind NaN, and a
	// MinCalls larger than Window), set your fields, remove the panic.
	lab.NotImplemented(7, "NewBreaker")
	return nil
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
	// Goal: let the call through, or fail fast with ErrOpen, and hand back
	// a done that reports the outcome to the generation that let it in.
	// TODO(task7): read time.Now(), lock, make the lazy open → half-open
	// transition if the cooldown is over, then decide by state: closed
	// admits; open refuses; half-open admits only while fewer than
	// HalfOpenMax trials are out. The done you return must remember the
	// generation, ignore every call after its first, and, when it counts,
	// add the outcome to the window or to the trial results and make any
	// transition that follows.
	lab.NotImplemented(7, "Breaker.Allow")
	return nil, nil
}

// State returns the state the breaker is in now. An open breaker whose
// cooldown is over reports HalfOpen, even if no call has come since.
func (b *Breaker) State() State {
	// Goal: the state as Allow would see it right now.
	// TODO(task7): lock, make the same lazy transition as Allow, return the
	// state.
	lab.NotImplemented(7, "Breaker.State")
	return Closed
}
