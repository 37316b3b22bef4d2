package harness

import (
	"ratelab/model/ties"
	"sync"
	"time"
)

// Intended returns when request seq (0-based) of a constant-rate schedule of
// rate requests per second is due, measured from the start of the flood:
// (seq+1)/rate, as vegeta's ConstantPacer sends its first request one
// interval after the start, rounded as ties.Send rounds it (to its
// 10 µs grid) so that unrelated events keep off the same instant. The simulation uses the same
// schedule.
func Intended(rate float64, seq uint64) time.Duration {
	return ties.Send(rate, seq)
}

// Pace is a constant-rate schedule of count requests as a pure function, in
// the shape of vegeta's Pacer: given the time elapsed since the start and the
// number of requests sent so far (hits), it returns how long to wait before
// the next one, or stop once all count are sent. A request that is already
// due waits 0, so a generator that fell behind catches up at once rather than
// silently skipping its schedule.
func Pace(rate float64, count uint64, elapsed time.Duration, hits uint64) (wait time.Duration, stop bool) {
	if hits >= count {
		return 0, true
	}
	due := Intended(rate, hits)
	if due <= elapsed {
		return 0, false
	}
	return due - elapsed, false
}

// pacer adapts a Schedule's Pace to vegeta's Pacer interface, and remembers when the
// attack began: vegeta calls Pace(elapsed, 0) right after it takes its start
// time, so now − elapsed recovers that instant to within a few hundred
// nanoseconds. Intended send times are measured from it.
type pacer struct {
	sched *Schedule

	once  sync.Once
	began time.Time
}

func (p *pacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	p.once.Do(func() { p.began = time.Now().Add(-elapsed) })
	return p.sched.Pace(elapsed, hits)
}

// Rate returns the schedule's rate at elapsed in requests per second, as
// vegeta's Pacer interface asks.
func (p *pacer) Rate(elapsed time.Duration) float64 { return p.sched.RateAt(elapsed) }
