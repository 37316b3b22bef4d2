package redisbucketsuite

import (
	"fmt"
	"math"
	"strings"
	"time"

	"ratelab/internal/suites/suitekit"
)

// clockStepsBack moves miniredis's clock by steps drawn with
// suitekit.ClockSteps, some of them back by up to a day, and after every
// step asks one key for a random number of tokens, one at a time. However
// Redis's clock wanders, a bucket can hand out no more than it holds by a
// model refilled only for time past the furthest reading of the clock at
// which the key was asked (lazily, capped at burst): a stretch the clock covers twice, once before a step
// back and again after it, must not drip in twice. The limiter's answers
// are compared with that model after every step, to within one token over
// the whole run for rounding. Only the upper bound is judged: what a
// bucket hands out while its clock is behind its furthest reading is not
// promised. Four such runs, each on a key and a bucket of its own.
func clockStepsBack(e *env) {
	for run := range 4 {
		if msg := clockRun(e, fmt.Sprintf("steps-back-%d", run)); msg != "" {
			e.t.Fatal(msg)
		}
	}
}

// clockRun is one run of clockStepsBack on key name: it returns what went
// wrong, or "".
func clockRun(e *env, name string) string {
	// A rate high enough that a step back of a few milliseconds is worth
	// tokens, so that most steps the generator draws matter.
	rate := float64(20+e.rng.IntN(180)) / float64(1+e.rng.IntN(3)) // about 7 to 200 per second
	burst := float64(2 + e.rng.IntN(20))
	x := e.limiter(rate, burst, nil)
	var (
		furthest time.Time // the model: the bucket as of the clock's furthest reading
		seen     bool      // whether the key has been asked yet
		tokens   = burst
		admitted int     // by the limiter, in all
		excess   float64 // admitted beyond the model, in all
		trace    []string
	)
	step := func(d time.Duration) string {
		e.jump(d) // keys keep their TTLs, so the bucket is never lost to an expiry
		// Behind its furthest reading, drain the bucket: a take then is
		// what moves a wrong ts back, and a drain shows what dripped in
		// twice. Otherwise leave some tokens for after a step back.
		asked, got := int(burst)+1, 0
		if !e.clock.Before(furthest) {
			asked = e.rng.IntN(int(burst))
		}
		// The furthest reading that counts is the furthest at which the
		// key was asked: a bucket cannot know of a clock it never read.
		if asked > 0 && !seen {
			seen, furthest = true, e.clock // a new key: a full bucket
		}
		if asked > 0 && e.clock.After(furthest) {
			tokens = math.Min(burst, tokens+e.clock.Sub(furthest).Seconds()*rate)
			furthest = e.clock
		}
		for got < asked {
			if ok, _ := x.take(name, 1); !ok {
				break
			}
			got++
		}
		admitted += got
		held := math.Floor(tokens + 1e-9*burst)
		excess += math.Max(0, float64(got)-held)
		tokens = math.Max(0, tokens-float64(got))
		behind := time.Duration(0)
		if seen {
			behind = furthest.Sub(e.clock)
		}
		trace = append(trace, fmt.Sprintf("  clock %+v (then %v behind its furthest reading): asked for %d, %d admitted; the model held %v",
			d, behind, asked, got, held))
		if excess > 1 {
			return fmt.Sprintf("rate=%v/s burst=%v, key %q, while Redis's clock (TIME) moved, back too:\n%s\n"+
				"%d admitted in all, %v more than the bucket held by Redis's furthest clock reading\n"+
				"a clock that steps back (an NTP correction, a failover to a replica whose clock is behind) and catches up "+
				"covers the same stretch twice: refill only for time past the stored ts, and never move ts back",
				rate, burst, name, strings.Join(lastLines(trace, 12), "\n"), admitted, excess)
		}
		return ""
	}
	for _, d := range append(suitekit.ClockSteps(e.rng, 120), 0) {
		if msg := step(d); msg != "" {
			return msg
		}
	}
	return ""
}

func lastLines(lines []string, n int) []string {
	if len(lines) > n {
		return append([]string{"  …"}, lines[len(lines)-n:]...)
	}
	return lines
}
