// Package bucketsuite is the one test suite of task 3 (token bucket and keyed
// limiter). The exercise and the reference solution each run it through a
// thin adapter, so both are held to exactly the same checks. Learners do not
// edit it.
//
// Every check is a subtest with a fixed name, such as
// TestBucket/TokenBucket/ExactWait. Most run inside a testing/synctest
// bubble that starts at a random instant: time.Now is fake and time.Sleep
// only moves the fake clock, so the checks are exact and fast. The
// RealClock and MemoryBoundedOnRealClock checks hold the same promises on
// the real clock, with bounds that only widen on a slow machine, so code
// that behaves only in fake time fails there. Inputs (rates, bursts, sizes,
// sleeps, keys, flood sizes) are drawn from the run's seed (suitekit.Rand),
// next to a few fixed cases that document the intent. Every call into the
// code under test goes through a helper that turns a panic into a failure
// of that subtest only.
//
// A TryTake that blocks for ever, say on a mutex locked twice, hangs its
// subtest instead of failing it: a goroutine waiting for a mutex is not
// durably blocked, so synctest cannot tell. Run the tests with -timeout; the
// timeout report names the subtest that was running.
package bucketsuite

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// Bucket is the part of a token bucket the suite drives: TryTake spends n
// tokens or reports how long until n tokens will be there.
type Bucket interface {
	TryTake(n float64) (ok bool, wait time.Duration)
}

// Keyed is the part of a keyed limiter the suite drives: TryTake on the
// bucket of key.
type Keyed interface {
	TryTake(key string, n float64) (ok bool, wait time.Duration)
}

// Run runs every check of task 3 as subtests of t, the TokenBucket checks
// under "TokenBucket/" and the KeyedLimiter ones under "KeyedLimiter/".
// newBucket and newKeyed are the package's constructors; rate is in tokens per
// second and burst in tokens.
func Run(t *testing.T, newBucket func(rate, burst float64) Bucket, newKeyed func(rate, burst float64) Keyed) {
	RunWithZero(t, newBucket, newKeyed, nil, nil)
}

// RunWithZero is Run that also checks the zero values, which zeroBucket and
// zeroKeyed return (new(TokenBucket), new(KeyedLimiter)): each promises to
// admit nothing. With nil ones those subtests fail, saying so.
func RunWithZero(t *testing.T, newBucket func(rate, burst float64) Bucket, newKeyed func(rate, burst float64) Keyed, zeroBucket func() Bucket, zeroKeyed func() Keyed) {
	s := &suite{newBucket: newBucket, newKeyed: newKeyed, zeroBucket: zeroBucket, zeroKeyed: zeroKeyed}
	group(t, "TokenBucket", []check{
		{name: "StartsFull", f: s.startsFull},
		{name: "RefillsAtRate", f: s.refillsAtRate},
		{name: "CapsAtBurst", f: s.capsAtBurst},
		{name: "ExactWait", f: s.exactWait},
		{name: "DenialLeavesStateUntouched", f: s.denialLeavesStateUntouched},
		{name: "MoreThanBurstNeverSucceeds", f: s.moreThanBurst},
		{name: "FractionalTokens", f: s.fractionalTokens},
		{name: "ZeroOrNegativeTakesNothing", f: s.zeroOrNegative},
		{name: "RateZeroNeverRefills", f: s.rateZero},
		{name: "RejectsNegativeOrNaN", f: s.rejectsInvalid},
		{name: "ZeroValueAdmitsNothing", f: s.zeroBucketAdmitsNothing},
		{name: "ConcurrentNeverExceedsBurst", f: s.concurrentNeverExceedsBurst},
		{name: "ConcurrentRefillBound", f: s.concurrentRefillBound},
		{name: "MatchesModel", f: s.matchesModel},
		{name: "RealClock", f: s.bucketRealClock, realClock: true},
	})
	group(t, "KeyedLimiter", []check{
		{name: "KeysAreIndependent", f: s.keysAreIndependent},
		{name: "MatchesModelPerKey", f: s.matchesModelPerKey},
		{name: "ConcurrentNeverExceedsBurstPerKey", f: s.concurrentPerKey},
		{name: "FullBucketComesBackFull", f: s.fullBucketComesBackFull},
		{name: "RateZeroNeverRefills", f: s.keyedRateZero},
		{name: "RejectsNegativeOrNaN", f: s.keyedRejectsInvalid},
		{name: "ZeroValueAdmitsNothing", f: s.zeroKeyedAdmitsNothing},
		{name: "PartialBucketSurvivesFlood", f: s.partialBucketSurvivesFlood},
		{name: "MemoryBoundedUnderKeyFlood", f: s.memoryBounded},
		{name: "MemoryBoundedOnRealClock", f: s.memoryBoundedRealClock, realClock: true},
	})
}

// check is one subtest: its fixed name, which the grader's tasks.go maps to
// points, its body, and whether it runs on the real clock rather than in a
// synctest bubble.
type check struct {
	name      string
	f         func(*testing.T)
	realClock bool
}

// group runs checks as subtests of a subtest called name: each in its own
// bubble, started at a random instant (suitekit.Bubble), except those on
// the real clock. Promises that hold on the real clock are checked there
// too, so code that behaves only in fake time fails somewhere.
//
// The two groups run side by side (the TokenBucket and the KeyedLimiter
// are separate values, and the checks within a group one at a time): on
// two cores under the race detector that takes the suite from about 5 s
// to the KeyedLimiter's 3.5 s. The heap the memory checks read is the
// process's, but what the TokenBucket checks hold at any moment is
// kilobytes against their bound of 20 MB, and every real-clock bound
// measures the time that passed rather than assuming it. A crash while both
// run is told apart by the grader, which then runs one test at a time.
func group(t *testing.T, name string, checks []check) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		for _, c := range checks {
			if c.realClock {
				t.Run(c.name, c.f)
				continue
			}
			t.Run(c.name, func(t *testing.T) { suitekit.Bubble(t, c.f) })
		}
	})
}

type suite struct {
	newBucket  func(rate, burst float64) Bucket
	newKeyed   func(rate, burst float64) Keyed
	zeroBucket func() Bucket // nil: not given
	zeroKeyed  func() Keyed
}

// --- Calling the code under test ---

// bucket wraps a Bucket under test for one subtest. Its methods fail the
// subtest, rather than crash the test binary, when the code panics.
type bucket struct {
	t     *testing.T
	b     Bucket
	start time.Time // fake time of creation, to print offsets
}

func (s *suite) bucket(t *testing.T, rate, burst float64) *bucket {
	t.Helper()
	var b Bucket
	if r, stack := suitekit.Catch(func() { b = s.newBucket(rate, burst) }); r != nil {
		t.Fatal(suitekit.PanicReport(fmt.Sprintf("NewTokenBucket(%v, %v)", rate, burst), r, stack))
	}
	if b == nil {
		t.Fatalf("NewTokenBucket(%v, %v) = nil; want a bucket", rate, burst)
	}
	return &bucket{t: t, b: b, start: time.Now()}
}

// take calls TryTake(n).
func (x *bucket) take(n float64) (ok bool, wait time.Duration) {
	x.t.Helper()
	if r, stack := suitekit.Catch(func() { ok, wait = x.b.TryTake(n) }); r != nil {
		x.t.Fatal(suitekit.PanicReport(fmt.Sprintf("TryTake(%v)", n), r, stack))
	}
	return ok, wait
}

// expect calls TryTake(n) and fails the subtest unless it returns wantOK and
// a wait between wantWait and wantWait+1ns (rounding up a wait that is an
// exact number of nanoseconds in theory may add one). why says what is
// being checked.
func (x *bucket) expect(n float64, wantOK bool, wantWait time.Duration, why string) {
	x.t.Helper()
	ok, wait := x.take(n)
	if ok != wantOK || !waitMatches(wait, wantWait) {
		x.t.Fatalf("at t=%v: TryTake(%v) = (%v, %v); want (%v, %v)\n%s",
			time.Since(x.start), n, ok, wait, wantOK, wantWait, why)
	}
}

// drain takes n tokens one call at a time and expects each to succeed.
func (x *bucket) drain(n int, why string) {
	x.t.Helper()
	for range n {
		x.expect(1, true, 0, why)
	}
}

// keyed wraps a Keyed under test, like bucket.
type keyed struct {
	t     *testing.T
	k     Keyed
	start time.Time
}

func (s *suite) keyed(t *testing.T, rate, burst float64) *keyed {
	t.Helper()
	var k Keyed
	if r, stack := suitekit.Catch(func() { k = s.newKeyed(rate, burst) }); r != nil {
		t.Fatal(suitekit.PanicReport(fmt.Sprintf("NewKeyedLimiter(%v, %v)", rate, burst), r, stack))
	}
	if k == nil {
		t.Fatalf("NewKeyedLimiter(%v, %v) = nil; want a limiter", rate, burst)
	}
	return &keyed{t: t, k: k, start: time.Now()}
}

func (x *keyed) take(key string, n float64) (ok bool, wait time.Duration) {
	x.t.Helper()
	if r, stack := suitekit.Catch(func() { ok, wait = x.k.TryTake(key, n) }); r != nil {
		x.t.Fatal(suitekit.PanicReport(fmt.Sprintf("TryTake(%q, %v)", key, n), r, stack))
	}
	return ok, wait
}

// fast calls TryTake(key, n) without a guard of its own, for floods of
// calls; run the flood under guard.
func (x *keyed) fast(key string, n float64) (ok bool, wait time.Duration) {
	return x.k.TryTake(key, n)
}

// guard runs f, which calls the code under test many times, and fails the
// subtest if it panics.
func (x *keyed) guard(f func()) {
	x.t.Helper()
	if r, stack := suitekit.Catch(f); r != nil {
		x.t.Fatal(suitekit.PanicReport("TryTake", r, stack))
	}
}

func (x *keyed) expect(key string, n float64, wantOK bool, wantWait time.Duration, why string) {
	x.t.Helper()
	ok, wait := x.take(key, n)
	if ok != wantOK || !waitMatches(wait, wantWait) {
		x.t.Fatalf("at t=%v: TryTake(%q, %v) = (%v, %v); want (%v, %v)\n%s",
			time.Since(x.start), key, n, ok, wait, wantOK, wantWait, why)
	}
}

// flood makes count first-use calls TryTake(prefix+i, 1), which must all
// succeed since a new key has a full bucket.
func (x *keyed) flood(prefix string, count int) {
	x.t.Helper()
	for i := range count {
		key := prefix + strconv.Itoa(i)
		if ok, wait := x.take(key, 1); !ok {
			x.t.Fatalf("at t=%v: TryTake(%q, 1) = (%v, %v); want (true, 0s)\nthe first call for a key meets a full bucket",
				time.Since(x.start), key, ok, wait)
		}
	}
}

// waitMatches reports whether got is want, or want+1ns for a finite want
// other than 0 (a successful call must report exactly 0).
func waitMatches(got, want time.Duration) bool {
	if want == 0 || want == lab.InfDuration {
		return got == want
	}
	return got == want || got == want+1
}

// --- TokenBucket checks ---

func (s *suite) startsFull(t *testing.T) {
	x := s.bucket(t, 1, 5)
	x.drain(5, "a new bucket is full: burst=5 calls in a row succeed, with wait 0")
	x.expect(1, false, time.Second, "the 6th call finds the bucket empty; one token takes 1/rate = 1s")
}

// The fixed checks below use rates and times whose token counts are exact in
// binary floating point (quarters and eighths), so they test the logic of a
// bucket, not its rounding; ExactWait and MatchesModel test the rounding.

func (s *suite) refillsAtRate(t *testing.T) {
	x := s.bucket(t, 4, 3) // one token every 250ms
	x.drain(3, "a new bucket is full")
	x.expect(1, false, 250*time.Millisecond, "empty bucket at rate=4/s: the next token is 250ms away")
	time.Sleep(125 * time.Millisecond)
	x.expect(1, false, 125*time.Millisecond, "after 125ms half a token dripped in; 125ms to go")
	time.Sleep(125 * time.Millisecond)
	x.expect(1, true, 0, "after 250ms = 1/rate exactly one token dripped in")
	x.expect(1, false, 250*time.Millisecond, "that token is spent; exactly one call may pass per 1/rate")
	time.Sleep(625 * time.Millisecond)
	x.drain(2, "after 625ms, 2.5 tokens dripped in")
	x.expect(1, false, 125*time.Millisecond, "0.5 tokens left after two takes: 125ms to the next")
}

func (s *suite) capsAtBurst(t *testing.T) {
	x := s.bucket(t, 4, 3)
	time.Sleep(time.Hour)
	x.drain(3, "a full bucket left idle for an hour holds burst=3 tokens")
	x.expect(1, false, 250*time.Millisecond, "an idle full bucket must not collect more than burst=3 tokens")
	time.Sleep(time.Hour)
	x.drain(3, "after another idle hour the bucket is full again")
	x.expect(1, false, 250*time.Millisecond, "refill is capped at burst=3: an hour at 4/s must not leave 14400 tokens")
}

func (s *suite) exactWait(t *testing.T) {
	// rate 3/s: a token takes 333333333.33ns, so the wait rounds up to
	// 333333334ns, and 333333333ns is not enough.
	x := s.bucket(t, 3, 1)
	x.drain(1, "a new bucket is full")
	x.expect(1, false, 333333334, "wait = (1 − 0)/3 s = 333333333.3ns, rounded up to the nanosecond")
	time.Sleep(333333333)
	x.expect(1, false, 1, "after 333333333ns only 0.999999999 tokens are there; 0.33ns remain, rounded up to 1ns")
	time.Sleep(time.Nanosecond)
	x.expect(1, true, 0, "after 333333334ns the token is there")

	// rate 10/s, 0.3 tokens after 30ms.
	x = s.bucket(t, 10, 2)
	x.drain(2, "a new bucket is full")
	time.Sleep(30 * time.Millisecond)
	x.expect(1, false, 70*time.Millisecond, "0.3 tokens, want 1: wait = (1 − 0.3)/10 s")
	x.expect(2, false, 170*time.Millisecond, "0.3 tokens, want 2: wait = (2 − 0.3)/10 s")
	x.expect(0.5, false, 20*time.Millisecond, "0.3 tokens, want 0.5: wait = (0.5 − 0.3)/10 s")
	retryAfter(x, 2)

	// rate 7/s, fractional tokens: 1.5/7 s = 214285714.29ns.
	x = s.bucket(t, 7, 5)
	x.expect(4.5, true, 0, "a new bucket holds 5 tokens")
	x.expect(2, false, 214285715, "0.5 tokens, want 2: wait = 1.5/7 s rounded up to the nanosecond")
	retryAfter(x, 2)

	// A slow rate.
	x = s.bucket(t, 0.5, 1)
	x.drain(1, "a new bucket is full")
	x.expect(1, false, 2*time.Second, "rate 0.5/s: one token takes 2s")
	retryAfter(x, 1)

	s.exactWaitRandom(t)
}

// exactWaitRandom checks the wait of a refusal, and the retry after exactly
// that wait, on thousands of buckets with rates, bursts and states drawn
// from the run's seed. Half of them use any rate, where (n − tokens)/rate
// is rarely a whole number of nanoseconds and a wait rounded down shows;
// the other half use decimal rates, sizes and sleeps (12.5 tokens per
// second, 0.37 tokens, 40 ms), where the exact wait is often a whole number
// of nanoseconds that float64 arithmetic lands a hair on either side of, so
// a wait rounded up without checking it against the refill is refused on
// the retry (about one refusal in a hundred).
func (s *suite) exactWaitRandom(t *testing.T) {
	rng := suitekit.Rand(t)
	for i := range 4000 {
		decimal := i%2 == 1
		rate, burst := randomRate(rng), randomBurst(rng)
		if decimal {
			// A divisor of a power of ten, so 1/rate is a whole number of
			// nanoseconds and so are many waits.
			rate = []float64{1, 2, 4, 5, 8, 16, 25, 32, 64, 125}[rng.IntN(10)] * math.Pow10(rng.IntN(5)-2)
			burst = float64(1 + rng.IntN(50))
		}
		// size returns a request size up to most: any, or in hundredths
		// from 1.
		size := func(most float64) float64 {
			if decimal {
				return float64(100+rng.IntN(int(most*100)-99)) / 100
			}
			return most * rng.Float64()
		}
		x := s.bucket(t, rate, burst)
		m := newModel(rate, burst, 0)
		var history []string
		call := func(n float64) (bool, time.Duration) {
			ok, wait := x.take(n)
			history = append(history, fmt.Sprintf("  t=%v: TryTake(%v) = (%v, %v)", time.Since(x.start), n, ok, wait))
			if ok {
				m.commit(time.Since(x.start), n)
			}
			return ok, wait
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("bucket %d (rate=%v/s, burst=%v): %s\ncalls so far:\n%s", i, rate, burst, fmt.Sprintf(format, args...), strings.Join(history, "\n"))
		}
		// Spend part of the burst, let some of it drip back, spend again.
		if ok, _ := call(size(burst)); !ok {
			fail("a new bucket is full: any n up to burst passes")
		}
		sleep := randomSleep(rng, rate, burst) / 4
		if decimal {
			sleep = sleep.Truncate(time.Millisecond)
		}
		time.Sleep(sleep)
		now := time.Since(x.start)
		n := size(burst)
		wantOK, want, margin, exact := m.try(now, n)
		if wantOK || margin <= tokenSlack(burst) || want == lab.InfDuration {
			continue // no refusal to look at
		}
		ok, wait := call(n)
		lo, hi := waitBounds(exact, rate, burst)
		if ok || wait < lo || wait > hi {
			fail("TryTake(%v) = (%v, %v); want (false, %v): exactly (n − tokens)/rate = %s ns, rounded up to the nanosecond "+
				"(anything from %v to %v passes as float rounding)", n, ok, wait, want, exact.FloatString(3), lo, hi)
		}
		time.Sleep(wait)
		if ok, again := call(n); !ok {
			fail("slept exactly the wait %v, then TryTake(%v) = (false, %v); want (true, 0s)\n%s", wait, n, again, retryAdvice(wait, again))
		}
	}
}

// retryAfter asks for n, sleeps exactly the wait it is given and asks again,
// which must succeed.
func retryAfter(x *bucket, n float64) {
	x.t.Helper()
	ok, wait := x.take(n)
	if ok {
		x.t.Fatalf("at t=%v: TryTake(%v) = (true, %v); want false (test setup expects an empty bucket)", time.Since(x.start), n, wait)
	}
	time.Sleep(wait)
	if ok, again := x.take(n); !ok {
		x.t.Fatalf("at t=%v: TryTake(%v) = (false, %v); want (true, 0s)\n%s",
			time.Since(x.start), n, again, retryAdvice(wait, again))
	}
}

// retryAdvice explains why a caller that slept exactly the wait it was given
// was refused again with a new wait of again.
func retryAdvice(wait, again time.Duration) string {
	msg := fmt.Sprintf("a caller that sleeps exactly the wait it was given (%v) must then succeed", wait)
	if again > 10 {
		return msg + ": round the wait up to the next nanosecond, never down, and leave the bucket untouched when you refuse"
	}
	return msg + ".\nThe refusal came with a wait of only " + again.String() + ", so the wait was probably rounded up, " +
		"but floating-point error leaves the refilled tokens a hair below n at exactly that moment.\n" +
		"Make the check and the wait agree: compare with a tiny tolerance (say 1e-12×burst), or check the wait " +
		"you computed against your own refill and add a nanosecond while it falls short."
}

func (s *suite) denialLeavesStateUntouched(t *testing.T) {
	// Denied calls every 1/64s must neither restart the refill nor spend
	// anything: the token due at 125ms is still due at 125ms.
	const step = time.Second / 64
	x := s.bucket(t, 8, 1)
	x.drain(1, "a new bucket is full")
	for i := 1; i < 8; i++ {
		time.Sleep(step)
		x.expect(1, false, time.Duration(8-i)*step,
			fmt.Sprintf("denied call %d, 15.625ms apart: the token is due at t=125ms whatever happens meanwhile, so each wait counts down to it; "+
				"a denial must not reset the refill clock or spend tokens", i))
	}
	time.Sleep(step)
	x.expect(1, true, 0, "after 7 denied calls the token is still due at t=125ms = 1/rate: denials must not delay the next success")

	// A denied request for 2 must not spend the 1 token that is there.
	x = s.bucket(t, 1, 3)
	x.expect(2, true, 0, "a new bucket holds 3 tokens")
	x.expect(2, false, time.Second, "1 token left, want 2: wait = 1/1 s")
	x.expect(1, true, 0, "the denied TryTake(2) must not have spent the 1 token left")
	x.expect(1, false, time.Second, "now the bucket is empty")

	// A thousand denials at the same instant change nothing either.
	x = s.bucket(t, 4, 1)
	x.drain(1, "a new bucket is full")
	for range 1000 {
		x.expect(1, false, 250*time.Millisecond, "repeated denials at the same instant must all give the same wait")
	}
	time.Sleep(250 * time.Millisecond)
	x.expect(1, true, 0, "after 1000 denials the token is still due 1/rate = 250ms after the last success")
}

func (s *suite) rateZero(t *testing.T) {
	rng := suitekit.Rand(t)
	burst := float64(1+rng.IntN(10)) + 0.5*float64(rng.IntN(2))
	x := s.bucket(t, 0, burst)
	x.expect(burst, true, 0, "a new bucket is full, even at rate 0")
	x.expect(0.5, false, lab.InfDuration, "rate 0 never refills: a token that never comes is lab.InfDuration away")
	time.Sleep(1000 * time.Hour)
	x.expect(0.5, false, lab.InfDuration, "rate 0 never refills, however long the bucket waits")

	// So slow that the wait does not fit in a Duration (about 292 years).
	rate := 1e-11 + 9e-11*rng.Float64() // below 1 / 9.3e9 s
	x = s.bucket(t, rate, 1)
	x.expect(1, true, 0, "a new bucket is full")
	x.expect(1, false, lab.InfDuration, fmt.Sprintf("at %v tokens per second one token takes %.3g s, more than a Duration holds: "+
		"a wait that does not fit in a Duration is lab.InfDuration, never a wrapped or negative one", rate, 1/rate))
}

func (s *suite) keyedRateZero(t *testing.T) {
	rng := suitekit.Rand(t)
	burst := float64(1+rng.IntN(10)) + 0.5*float64(rng.IntN(2))
	k := s.keyed(t, 0, burst)
	k.expect("spent", burst, true, 0, "a new key's bucket is full, even at rate 0")
	k.expect("spent", 0.5, false, lab.InfDuration, "rate 0 never refills: a token that never comes is lab.InfDuration away")
	time.Sleep(1000 * time.Hour)
	k.expect("spent", 0.5, false, lab.InfDuration, "rate 0 never refills, however long the bucket waits, and a bucket that is not full is never forgotten")
	k.expect("other", burst, true, 0, "another key has its own full bucket")
}

func (s *suite) rejectsInvalid(t *testing.T) {
	rejects(t, "NewTokenBucket", func(rate, burst float64) { s.newBucket(rate, burst) })
	s.bucket(t, 0, 0).expect(1, false, lab.InfDuration, "rate and burst 0 are allowed: a bucket of burst 0 admits nothing")
}

func (s *suite) keyedRejectsInvalid(t *testing.T) {
	rejects(t, "NewKeyedLimiter", func(rate, burst float64) { s.newKeyed(rate, burst) })
	s.keyed(t, 0, 0).expect("k", 1, false, lab.InfDuration, "rate and burst 0 are allowed: a bucket of burst 0 admits nothing")
}

// rejects checks that the constructor ctor, called name, panics when the
// rate or the burst is negative or NaN, with values drawn from the run's
// seed.
func rejects(t *testing.T, name string, ctor func(rate, burst float64)) {
	t.Helper()
	rng := suitekit.Rand(t)
	neg := -math.Ldexp(1+rng.Float64(), rng.IntN(40)-20)
	ok := math.Ldexp(1+rng.Float64(), rng.IntN(20)-5)
	for _, args := range [][2]float64{{neg, ok}, {ok, neg}, {math.NaN(), ok}, {ok, math.NaN()}, {math.Inf(-1), ok}} {
		r, stack := suitekit.Catch(func() { ctor(args[0], args[1]) })
		if err, isErr := r.(error); isErr && errors.Is(err, lab.ErrNotImplemented) {
			t.Fatal(suitekit.PanicReport(name, r, stack))
		}
		if r == nil {
			t.Errorf("%s(rate=%v, burst=%v) returned; want a panic (rate and burst must be zero or more, and not NaN)",
				name, args[0], args[1])
		}
	}
}

func (s *suite) moreThanBurst(t *testing.T) {
	x := s.bucket(t, 10, 2)
	x.expect(2.5, false, lab.InfDuration, "n greater than burst=2 can never succeed: (false, lab.InfDuration)")
	x.expect(3, false, lab.InfDuration, "n greater than burst=2 can never succeed: (false, lab.InfDuration)")
	time.Sleep(time.Hour)
	x.expect(3, false, lab.InfDuration, "waiting does not help: n > burst can never succeed")
	x.expect(math.NaN(), false, lab.InfDuration, "NaN tokens can never be satisfied: (false, lab.InfDuration)")
	x.expect(2, true, 0, "n = burst succeeds on a full bucket, and the impossible requests spent nothing")
}

func (s *suite) fractionalTokens(t *testing.T) {
	x := s.bucket(t, 1, 1)
	x.expect(0.5, true, 0, "a full bucket of 1 token has room for two halves")
	x.expect(0.5, true, 0, "a full bucket of 1 token has room for two halves")
	x.expect(0.5, false, 500*time.Millisecond, "empty at rate=1/s: half a token takes 500ms")
	time.Sleep(250 * time.Millisecond)
	x.expect(0.25, true, 0, "after 250ms a quarter token is there")
	x.expect(0.25, false, 250*time.Millisecond, "and spent")

	x = s.bucket(t, 2, 2)
	x.expect(1.5, true, 0, "a new bucket holds 2 tokens")
	x.expect(1, false, 250*time.Millisecond, "0.5 left, want 1, rate=2/s: wait = 0.5/2 s")
}

func (s *suite) zeroOrNegative(t *testing.T) {
	x := s.bucket(t, 1, 1)
	x.expect(0, true, 0, "TryTake(0) always succeeds")
	x.expect(1, true, 0, "TryTake(0) on a full bucket must not spend anything")
	x.expect(0, true, 0, "TryTake(0) succeeds even on an empty bucket")
	x.expect(-1, true, 0, "TryTake(n < 0) succeeds and changes nothing")
	x.expect(1, false, time.Second, "TryTake(-1) must not have added a token")
}

func (s *suite) concurrentNeverExceedsBurst(t *testing.T) {
	// No goroutine sleeps, so fake time stands still and exactly burst
	// calls may pass. A read-modify-write without a lock loses updates and
	// lets more through (and -race reports it, every time). Without the
	// race detector it shows only when goroutines overlap, which on a busy
	// machine with two cores may take several rounds: sixteen of them.
	const (
		rounds     = 16
		goroutines = 4
		calls      = 10000
	)
	rng := suitekit.Rand(t)
	for round := range rounds {
		burst := goroutines*calls/2 + rng.IntN(goroutines*calls/4) // half to three quarters of the calls
		// A power of two, so a bucket kept in any unit counts exactly:
		// nothing refills here, and the count must be exact.
		x := s.bucket(t, math.Ldexp(1, rng.IntN(9)-4), float64(burst))
		var admitted atomic.Int64
		suitekit.Hammer(t, goroutines, "TryTake", func(int) {
			for range calls {
				if ok, _ := x.b.TryTake(1); ok {
					admitted.Add(1)
				}
			}
		})
		if got := admitted.Load(); got != int64(burst) {
			t.Fatalf("round %d: %d goroutines × %d TryTake(1) with no time passing admitted %d; want exactly burst=%d\n"+
				"more means lost updates: TryTake must hold a mutex while it reads and writes the bucket",
				round, goroutines, calls, got, burst)
		}
	}
}

func (s *suite) concurrentRefillBound(t *testing.T) {
	// Goroutines call and sleep at random for about half a second of fake
	// time. Demand far exceeds supply and the bucket never sits full, so
	// what passes is burst + rate×elapsed minus what is left at the end:
	// under 1 token plus what dripped in during the last sleep (≤ 0.3).
	const (
		goroutines = 4
		calls      = 300
	)
	seeds := suitekit.Rand(t)
	rate := 50 + 100*seeds.Float64()
	burst := float64(5 + seeds.IntN(16))
	var gseeds [goroutines]uint64
	for g := range gseeds {
		gseeds[g] = seeds.Uint64()
	}
	x := s.bucket(t, rate, burst)
	start := time.Now()
	var admitted atomic.Int64
	suitekit.Hammer(t, goroutines, "TryTake", func(g int) {
		rng := rand.New(rand.NewPCG(gseeds[g], 3))
		for range calls {
			if ok, _ := x.b.TryTake(1); ok {
				admitted.Add(1)
			}
			time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
		}
	})
	elapsed := time.Since(start)
	got := float64(admitted.Load())
	most := burst + rate*elapsed.Seconds()
	if got > most+1e-9 {
		t.Fatalf("%d goroutines over %v admitted %v; want at most burst + rate×elapsed = %v + %v×%v = %.3f",
			goroutines, elapsed, got, burst, rate, elapsed.Seconds(), most)
	}
	if got < most-2 {
		t.Fatalf("%d goroutines over %v admitted %v; want about burst + rate×elapsed = %.3f (at least %.3f)\n"+
			"tokens went missing: a denied call must not spend tokens or restart the refill, even under concurrent calls",
			goroutines, elapsed, got, most, most-2)
	}
}

func (s *suite) matchesModel(t *testing.T) {
	differential(t, false, func(rate, burst float64) taker {
		x := s.bucket(t, rate, burst)
		return func(_ string, n float64) (bool, time.Duration) { return x.take(n) }
	})
}

// --- KeyedLimiter checks ---

func (s *suite) keysAreIndependent(t *testing.T) {
	x := s.keyed(t, 1, 2)
	x.expect("a", 2, true, 0, "a new key has a full bucket of burst=2")
	x.expect("a", 1, false, time.Second, "key a is empty: one token takes 1s")
	x.expect("b", 1, true, 0, "key b has its own full bucket; a's use must not touch it")
	x.expect("b", 1, true, 0, "key b has its own full bucket of 2")
	x.expect("b", 1, false, time.Second, "key b is empty now")
	time.Sleep(500 * time.Millisecond)
	x.expect("a", 1, false, 500*time.Millisecond, "key a refills on its own: 0.5 tokens after 500ms")
	time.Sleep(500 * time.Millisecond)
	x.expect("a", 1, true, 0, "key a refilled one token after 1s")
	x.expect("c", 2, true, 0, "a third key starts full")
	x.expect("a", 3, false, lab.InfDuration, "n greater than burst=2 can never succeed for any key")
	x.expect("", 2, true, 0, "the empty string is a key like any other")
}

func (s *suite) matchesModelPerKey(t *testing.T) {
	differential(t, true, func(rate, burst float64) taker {
		x := s.keyed(t, rate, burst)
		return x.take
	})
}

func (s *suite) concurrentPerKey(t *testing.T) {
	// Every goroutine cycles over the same keys with no time passing: each
	// key must admit exactly burst calls. As for one bucket, lost updates
	// show only when goroutines overlap, which on a busy machine with two
	// cores may take several rounds: sixteen of them.
	const (
		rounds     = 16
		goroutines = 4
		calls      = 8000
	)
	rng := suitekit.Rand(t)
	for round := range rounds {
		keys := suitekit.RandomKeys(rng, 2+rng.IntN(7))
		burst := goroutines * calls / len(keys) / 2
		x := s.keyed(t, math.Ldexp(1, rng.IntN(9)-4), float64(burst)) // exact in any unit, as above
		admitted := make([]atomic.Int64, len(keys))
		suitekit.Hammer(t, goroutines, "TryTake", func(int) {
			for i := range calls {
				if ok, _ := x.k.TryTake(keys[i%len(keys)], 1); ok {
					admitted[i%len(keys)].Add(1)
				}
			}
		})
		for k := range admitted {
			if got := admitted[k].Load(); got != int64(burst) {
				t.Errorf("round %d: %d goroutines × %d calls with no time passing admitted %d for key %q; want exactly burst=%d\n"+
					"the limiter must serialise access to the buckets (a mutex around the map and the bucket)",
					round, goroutines, calls/len(keys), got, keys[k], burst)
			}
		}
		if t.Failed() {
			return
		}
	}
}

func (s *suite) fullBucketComesBackFull(t *testing.T) {
	// A bucket that refilled to full may be dropped; its key must then get
	// a full bucket again, which is the same thing.
	x := s.keyed(t, 1, 3)
	x.expect("returning", 3, true, 0, "a new key has a full bucket of burst=3")
	x.expect("returning", 1, false, time.Second, "key is empty: one token takes 1s")
	time.Sleep(time.Hour)
	x.flood("flood-", 5000) // gives the limiter reasons to drop full buckets
	x.drain("returning", 3, "after an hour the key's bucket is full again, whether or not the limiter kept it")
	x.expect("returning", 1, false, time.Second, "a returning key's bucket holds burst=3, not more")
}

func (x *keyed) drain(key string, n int, why string) {
	x.t.Helper()
	for range n {
		x.expect(key, 1, true, 0, why)
	}
}

func (s *suite) partialBucketSurvivesFlood(t *testing.T) {
	// Only full buckets may be dropped: a key that still owes tokens must
	// keep owing them however many other keys come by.
	x := s.keyed(t, 1, 3)
	x.expect("partial", 2, true, 0, "a new key has a full bucket of burst=3")
	x.flood("early-", 5000)
	time.Sleep(1500 * time.Millisecond) // the early keys are full again; "partial" holds 2.5
	x.flood("late-", 5000)
	x.expect("partial", 3, false, 500*time.Millisecond,
		"after a flood of 10000 other keys the key still holds 1 + 1.5s×1/s = 2.5 tokens: only full buckets may be dropped")
	x.expect("partial", 2.5, true, 0, "the key holds 2.5 tokens")
}

// zeroBucketAdmitsNothing holds the zero TokenBucket to its doc comment: its
// rate and burst are 0, so it admits nothing, at once or later.
func (s *suite) zeroBucketAdmitsNothing(t *testing.T) {
	if s.zeroBucket == nil {
		t.Fatal("the test file gives the suite no zero TokenBucket: restore the package's frozen test file")
	}
	rng := suitekit.Rand(t)
	x := &bucket{t: t, b: s.zeroBucket(), start: time.Now()}
	for range 20 {
		n := []float64{1, 0.5, 1e-9, 1 + 100*rng.Float64()}[rng.IntN(4)]
		x.expect(n, false, lab.InfDuration, "the zero TokenBucket admits nothing (rate and burst 0): a token that never comes is lab.InfDuration away")
		time.Sleep(time.Duration(rng.Int64N(int64(1000 * time.Hour))))
	}
	x.expect(0, true, 0, "n ≤ 0 always succeeds, on the zero value too")
}

// zeroKeyedAdmitsNothing holds the zero KeyedLimiter to its doc comment: it
// admits nothing for any key, and does not panic (a nil map, say).
func (s *suite) zeroKeyedAdmitsNothing(t *testing.T) {
	if s.zeroKeyed == nil {
		t.Fatal("the test file gives the suite no zero KeyedLimiter: restore the package's frozen test file")
	}
	rng := suitekit.Rand(t)
	x := &keyed{t: t, k: s.zeroKeyed(), start: time.Now()}
	for i := range 20 {
		key := fmt.Sprintf("client-%d", rng.IntN(5))
		n := []float64{1, 0.5, 1e-9, 1 + 100*rng.Float64()}[rng.IntN(4)]
		if ok, wait := x.take(key, n); ok || wait != lab.InfDuration {
			t.Fatalf("call %d at t=%v: TryTake(%q, %v) = (%v, %v) on the zero KeyedLimiter; want (false, lab.InfDuration): the zero value admits nothing",
				i, time.Since(x.start), key, n, ok, wait)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(1000 * time.Hour))))
	}
}
