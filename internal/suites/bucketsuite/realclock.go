package bucketsuite

import (
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
}
