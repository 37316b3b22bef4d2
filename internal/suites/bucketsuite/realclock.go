package bucketsuite

import (
	"fmt"
	"math"
	"testing"
	"time"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// bucketRealClock checks a TokenBucket on the real clock, outside any
// bubble, with bounds that only widen on a slow machine: a new bucket
// admits its burst and not much more; a refusal's wait is at most one
// token away, and sleeping it (time.Sleep sleeps at least that long) is
// always enough; more than the burst never passes; an idle bucket fills
// only to its burst.
func (s *suite) bucketRealClock(t *testing.T) {
	rng := suitekit.Rand(t)
	rate := 200 + 1800*rng.Float64() // a token every 0.5 to 5 ms
	burst := float64(3 + rng.IntN(18))
	token := time.Duration(math.Ceil(1e9 / rate))
	x := s.bucket(t, rate, burst)

	// drain takes single tokens until one is refused, and returns how many
	// passed, how long that took and the refusal's wait.
	drain := func() (passed int, took, wait time.Duration) {
		start := time.Now()
		for {
			ok, w := x.take(1)
			if !ok {
				return passed, time.Since(start), w
			}
			if passed++; passed > 1_000_000 {
				t.Fatalf("on the real clock (rate=%v/s, burst=%v): a million TryTake(1) in a row passed; want at most burst + rate×elapsed", rate, burst)
			}
		}
	}
	passed, took, wait := drain()
	if float64(passed) < burst || float64(passed) > burst+rate*took.Seconds()+1 {
		t.Fatalf("on the real clock (rate=%v/s, burst=%v): a new bucket admitted %d TryTake(1) in a row in %v; want burst=%v, and at most %.1f with what dripped in meanwhile",
			rate, burst, passed, took, burst, burst+rate*took.Seconds()+1)
	}
	for range 5 {
		if wait <= 0 || wait > token+time.Microsecond {
			t.Fatalf("on the real clock (rate=%v/s, burst=%v): a refusal on an empty bucket waits %v; want more than 0 and at most one token's %v",
				rate, burst, wait, token)
		}
		time.Sleep(wait)
		if ok, again := x.take(1); !ok {
			t.Fatalf("on the real clock (rate=%v/s, burst=%v): slept the wait %v after a refusal, then TryTake(1) = (false, %v); want (true, 0s)\n%s",
				rate, burst, wait, again, retryAdvice(wait, again))
		}
		_, _, wait = drain()
	}
	if ok, w := x.take(burst + 0.5); ok || w != lab.InfDuration {
		t.Fatalf("on the real clock: TryTake(%v) with burst=%v = (%v, %v); want (false, lab.InfDuration)", burst+0.5, burst, ok, w)
	}
	// Idle for twice the time to fill up: the bucket holds burst, no more.
	time.Sleep(2*time.Duration(burst)*token + 10*time.Millisecond)
	passed, took, _ = drain()
	if float64(passed) < burst || float64(passed) > burst+rate*took.Seconds()+1 {
		t.Fatalf("on the real clock (rate=%v/s, burst=%v): after idling twice the time to fill up, %d TryTake(1) in a row passed in %v; want burst=%v, and at most %.1f with what dripped in meanwhile",
			rate, burst, passed, took, burst, burst+rate*took.Seconds()+1)
	}

	// Callers at once, on a bucket fast enough that admissions and
	// refusals interleave: each call reads the clock before it reaches the
	// bucket, so another call that read it later may get there first, and
	// the bucket then holds an instant newer than this call's. The refusal
	// still owes a wait a bucket can have, never lab.InfDuration for n
	// within the burst: above 0, and at most n/rate from that newer instant.
	// The newer instant is before this call returned (t1) and this call's
	// own after it began (t0), so the wait is at most n/rate + (t1 − t0),
	// however long the machine kept the call from running.
	const (
		goroutines, calls = 8, 20_000
		fastRate          = 1e6 // a token a microsecond
		fastBurst         = 5.0
	)
	y := s.bucket(t, fastRate, fastBurst)
	suitekit.Hammer(t, goroutines, "TryTake", func(g int) {
		for i := range calls {
			n := 0.5 + (fastBurst-0.5)*float64((i*7+g*13)%100)/99
			t0 := time.Now()
			ok, w := y.b.TryTake(n)
			most := time.Duration(math.Ceil(n/fastRate*1e9)) + time.Since(t0) + time.Nanosecond
			if !ok && (w <= 0 || w > most) {
				panic(suitekit.Failure(fmt.Sprintf("on the real clock (rate=%v/s, burst=%v), %d goroutines at once: call %d of goroutine %d, TryTake(%v) = (false, %v); want a wait above 0 and at most n/rate plus how long the call took (%v)\n"+
					"a call may read the clock before another that reaches the bucket first: work out its wait from the state as it is, whichever instant is later",
					fastRate, fastBurst, goroutines, i, g, n, w, most)))
			}
		}
	})
}
