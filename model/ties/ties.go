// Package ties is the one rule that gives a flood in virtual time one
// outcome. Inside a testing/synctest bubble, events due at the same
// instant run in whatever order the scheduler picks, so a flood whose
// arrivals, timeouts and slot ends shared instants could end two ways. The
// rule, on both clocks: no two events whose order matters are ever due at
// the same instant, except where one is told to wait for the rest. The
// simulation (package model) handles an instant's events in a fixed order,
// clients giving up, then slots that finish, then arrivals, and every flood
// and scenario keeps that order by asking this package when to act instead
// of adding offsets of its own. On the wall clock the offsets are far below
// the noise.
//
// The instants, from the start of a schedule:
//
//   - sends, and so arrivals and ends of work (whole milliseconds after an
//     arrival), fall on multiples of [Grid] ([Send], [Round]); concurrent
//     schedules start [Schedule] apart, so two clients never arrive
//     together;
//   - a client gives up [GiveUp] its timeout, 5 µs early and off the grid:
//     an answer due at exactly the timeout is late, as any overhead makes
//     it on a real machine;
//   - an arrival waits until everything else due at its instant has
//     happened (in a bubble, the fake server's settle hook), so a slot freed
//     at that instant is free for it;
//   - periodic readings of counters start [ReadPhase] past the grid, between
//     all of the above, and a one-off reading waits for [NextRead];
//   - calls started "at once" start [Start] apart, 1 ns each in index
//     order, so the server admits the lowest indices first, and a call
//     retried after whole milliseconds keeps its own nanoseconds;
//   - a timer that restarts from its own expiry, or that would fire as a
//     call arrives on the grid, is shortened by [Restart]: 3,701 ns,
//     coprime with the grid's 10,000, so k generations later it lies k ×
//     3,701 ns off the grid.
package ties

import (
	"math"
	"time"
)

// Grid is the step every send falls on, from the start of its schedule.
const Grid = 10 * time.Microsecond

// The offsets of the rule, each below the next so that their order is the
// simulation's.
const (
	// start is the gap between calls started at once (Start): index order
	// within 2 µs for up to 2,000 calls, short of giveUp and readPhase.
	start = time.Nanosecond
	// schedule is the gap between concurrent schedules (Schedule).
	schedule = time.Microsecond
	// giveUp is how early a client's timer fires (GiveUp).
	giveUp = 5 * time.Microsecond
	// ReadPhase is how far past the grid periodic readings of counters
	// lie: after a client gives up, before the next schedule's arrival.
	ReadPhase = 5*time.Microsecond + 2*time.Nanosecond
	// restart is how much shorter a restarting timer runs (Restart).
	restart = 3701 * time.Nanosecond
	// oneOff is where a one-off reading lies past the grid (NextRead): a
	// nanosecond after the periodic ones, so the two never share an
	// instant either.
	oneOff = ReadPhase + time.Nanosecond
)

// Send returns when request seq (from 0) of an open-loop client sending
// rate requests per second is due, from the start of its schedule:
// (seq+1)/rate, the first one interval in as vegeta's constant pacer sends
// it, rounded to the grid.
func Send(rate float64, seq uint64) time.Duration {
	return Round(float64(seq+1) / rate)
}

// Round returns the instant s seconds from the start of a schedule,
// rounded to the grid.
func Round(s float64) time.Duration {
	return time.Duration(math.Round(s*float64(time.Second/Grid))) * Grid
}

// Schedule returns when concurrent schedule i starts after schedule 0: a
// microsecond apart. Past nine schedules the offsets would reach the next
// grid point, so they wrap (schedules i and i+9 may then tie; no flood has
// that many).
func Schedule(i int) time.Duration { return time.Duration(i%9) * schedule }

// GiveUp returns when a client whose timeout is d gives up, from when it
// sent: 5 µs early, off the grid, so that an answer due at exactly the
// timeout is late on both clocks and the server sees the client leave
// before that work ends.
func GiveUp(d time.Duration) time.Duration { return d - giveUp }

// Start returns when call i of calls started at once starts, after call 0.
func Start(i int) time.Duration { return time.Duration(i) * start }

// Restart returns the length to give a timer of nominal length d that
// restarts from its own expiry (an attempt sent again the instant the last
// one timed out) or fires as a call arrives on the grid (a call reported
// slow at exactly the moment the next call asks): 3,701 ns shorter, so
// that it comes before the arrival, as a timeout does, and generation after
// generation stays off the grid.
func Restart(d time.Duration) time.Duration { return d - restart }

// NextRead returns how long to wait, elapsed since the start of a
// schedule, for the next instant at which a one-off reading of counters
// races nothing: a nanosecond past where periodic readings lie. On the wall
// clock it is at most one grid step.
func NextRead(elapsed time.Duration) time.Duration {
	next := elapsed - elapsed%Grid + oneOff
	if next <= elapsed {
		next += Grid
	}
	return next - elapsed
}
