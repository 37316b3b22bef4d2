// Package bucketsuite is the one test suite of task 3 (token bucket and keyed
// limiter). The exercise and the reference solution each run it through a
// thin adapter, so both are held to exactly the same checks. Learners do not
// edit it.
//
// Every check is a subtest with a fixed name, such as
// TestBucket/TokenBucket/ExactWait, and runs inside a testing/synctest
// bubble: time.Now is fake and time.Sleep only moves the fake clock, so
// the checks are exact and fast. Every call into the code under test goes
// through a helper that turns a panic into a failure of that subtest only.
//
// A TryTake that blocks for ever, say on a mutex locked twice, hangs its
// subtest instead of failing it: a goroutine waiting for a mutex is not
// durably blocked, so synctest cannot tell. Run the tests with -timeout; the
// timeout report names the subtest that was running.
package bucketsuite

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
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
	s := &suite{newBucket: newBucket, newKeyed: newKeyed}
	suitekit.Group(t, "TokenBucket", []suitekit.Check{
		{Name: "StartsFull", F: s.startsFull},
		{Name: "RefillsAtRate", F: s.refillsAtRate},
		{Name: "CapsAtBurst", F: s.capsAtBurst},
		{Name: "ExactWait", F: s.exactWait},
		{Name: "DenialLeavesStateUntouched", F: s.denialLeavesStateUntouched},
		{Name: "MoreThanBurstNeverSucceeds", F: s.moreThanBurst},
		{Name: "FractionalTokens", F: s.fractionalTokens},
		{Name: "ZeroOrNegativeTakesNothing", F: s.zeroOrNegative},
		{Name: "ConcurrentNeverExceedsBurst", F: s.concurrentNeverExceedsBurst},
		{Name: "ConcurrentRefillBound", F: s.concurrentRefillBound},
		{Name: "MatchesModel", F: s.matchesModel},
	})
	suitekit.Group(t, "KeyedLimiter", []suitekit.Check{
		{Name: "KeysAreIndependent", F: s.keysAreIndependent},
		{Name: "MatchesModelPerKey", F: s.matchesModelPerKey},
		{Name: "ConcurrentNeverExceedsBurstPerKey", F: s.concurrentPerKey},
		{Name: "FullBucketComesBackFull", F: s.fullBucketComesBackFull},
		{Name: "PartialBucketSurvivesFlood", F: s.partialBucketSurvivesFlood},
		{Name: "MemoryBoundedUnderKeyFlood", F: s.memoryBounded},
	})
}

type suite struct {
	newBucket func(rate, burst float64) Bucket
	newKeyed  func(rate, burst float64) Keyed
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
	// lets more through (and -race reports it). Goroutines do not always
	// overlap, so a lock-free bucket shows it in most rounds, not in all:
	// eight rounds make a miss very unlikely.
	const (
		rounds     = 8
		goroutines = 4
		calls      = 10000
		burst      = goroutines * calls / 2
	)
	for round := range rounds {
		x := s.bucket(t, 1, burst)
		var admitted atomic.Int64
		suitekit.Hammer(t, goroutines, "TryTake", func(int) {
			for range calls {
				if ok, _ := x.b.TryTake(1); ok {
					admitted.Add(1)
				}
			}
		})
		if got := admitted.Load(); got != burst {
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
		rate       = 100.0
		burst      = 10.0
	)
	x := s.bucket(t, rate, burst)
	start := time.Now()
	var admitted atomic.Int64
	suitekit.Hammer(t, goroutines, "TryTake", func(g int) {
		rng := rand.New(rand.NewPCG(uint64(g), 3))
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
	differential(t, 1, []string{""}, func(rate, burst float64) taker {
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
	differential(t, 2, []string{"alice", "bob", "carol"}, func(rate, burst float64) taker {
		x := s.keyed(t, rate, burst)
		return x.take
	})
}

func (s *suite) concurrentPerKey(t *testing.T) {
	// Every goroutine cycles over the same keys with no time passing: each
	// key must admit exactly burst calls.
	const (
		goroutines = 4
		calls      = 8000
		keys       = 4
		burst      = goroutines * calls / keys / 2
	)
	x := s.keyed(t, 1, burst)
	var admitted [keys]atomic.Int64
	suitekit.Hammer(t, goroutines, "TryTake", func(int) {
		for i := range calls {
			if ok, _ := x.k.TryTake("key"+strconv.Itoa(i%keys), 1); ok {
				admitted[i%keys].Add(1)
			}
		}
	})
	for k := range admitted {
		if got := admitted[k].Load(); got != burst {
			t.Errorf("%d goroutines × %d calls with no time passing admitted %d for key%d; want exactly burst=%d\n"+
				"the limiter must serialise access to the buckets (a mutex around the map and the bucket)",
				goroutines, calls/keys, got, k, burst)
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

func (s *suite) memoryBounded(t *testing.T) {
	// A million distinct keys each take the one token of their bucket, in
	// batches of 1000 with 2ms of fake time between batches. At rate 1000/s
	// a bucket is full again 1ms after its take, so at any moment at most
	// 1000 buckets are not full and anything more may be dropped.
	//
	// Bound: a limiter that keeps every key holds a million 24-byte key
	// strings plus a million map entries: over 50 MB even with tiny
	// entries, about 135 MB measured with a map of values or of pointers.
	// One that drops full buckets keeps a few thousand: 0.1 MB for the
	// reference, and about 13 MB for a map of pointers swept only once it
	// passes 100000 keys. 32 MB leaves a wide margin on both sides.
	const (
		keys  = 1_000_000
		batch = 1000
		limit = 32 << 20
	)
	x := s.keyed(t, 1000, 1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := []byte("client-")
	for i := range keys {
		if i%batch == 0 && i > 0 {
			time.Sleep(2 * time.Millisecond)
		}
		buf = strconv.AppendInt(buf[:len("client-")], int64(1e9+i), 10)
		key := string(buf) // 17 bytes, a fresh allocation the limiter may keep
		if ok, wait := x.take(key, 1); !ok {
			t.Fatalf("at t=%v: TryTake(%q, 1) = (%v, %v); want (true, 0s)\nthe first call for a key meets a full bucket",
				time.Since(x.start), key, ok, wait)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(x.k)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > limit {
		t.Fatalf("after %d distinct keys, each full again 1ms after its only take, the live heap grew by %.1f MB; want under %d MB\n"+
			"drop buckets that have refilled to full (they are the same as no bucket), for instance in a sweep when the map grows",
			keys, float64(grown)/(1<<20), limit>>20)
	}
}

// --- The randomized differential test ---

// taker is one limiter under test: for a Bucket the key is ignored.
type taker func(key string, n float64) (ok bool, wait time.Duration)

// differential drives fresh limiters from open through random sequences of
// sleeps and TryTake calls with a fixed seed, and checks every answer against
// model, an exact token bucket per key. A limiter that is almost right, say
// one that drops elapsed time on a denial or rounds waits down, diverges
// within a few steps.
func differential(t *testing.T, seed uint64, keys []string, open func(rate, burst float64) taker) {
	t.Helper()
	const (
		sequences = 300
		steps     = 40
	)
	rates := []float64{0.5, 1, 2.5, 3, 7, 10, 60, 1000}
	bursts := []float64{1, 2, 3.5, 5, 10, 20}
	rng := rand.New(rand.NewPCG(seed, 42))
	for seq := range sequences {
		rate := rates[rng.IntN(len(rates))]
		burst := bursts[rng.IntN(len(bursts))]
		take := open(rate, burst)
		start := time.Now()
		models := make(map[string]*model)
		var history []string
		var retry *denial // the previous step, if it was a denial worth retrying
		for step := range steps {
			// Choose the key, n and how long to sleep first.
			var (
				key   string
				n     float64
				sleep time.Duration
				exact bool // retrying after exactly the wait given: must succeed
			)
			if retry != nil && rng.IntN(4) == 0 {
				key, n, sleep, exact = retry.key, retry.n, retry.wait, true
			} else {
				key = keys[rng.IntN(len(keys))]
				n = randomN(rng, burst)
				sleep = randomSleep(rng, rate, burst)
			}
			time.Sleep(sleep)
			now := time.Since(start)
			m := models[key]
			if m == nil {
				m = newModel(rate, burst, now) // a new key's bucket is full
				models[key] = m
			}
			ok, wait := take(key, n)
			call := fmt.Sprintf("TryTake(%v)", n)
			if len(keys) > 1 {
				call = fmt.Sprintf("TryTake(%q, %v)", key, n)
			}
			history = append(history, fmt.Sprintf("  t=%v (slept %v): %s = (%v, %v)", now, sleep, call, ok, wait))
			fail := func(want string, why string) {
				t.Helper()
				if !exact {
					why += "\n(the model holds min(burst, tokens + rate×elapsed), spends n only when there is enough, " +
						"changes nothing on a denial, and waits ⌈(n − tokens)/rate⌉ ns)"
				}
				t.Fatalf("sequence %d (rate=%v/s, burst=%v), step %d at t=%v: %s = (%v, %v); want %s\n%s\nsteps so far:\n%s",
					seq, rate, burst, step, now, call, ok, wait, want, strings.TrimPrefix(why, "\n"), strings.Join(lastN(history, 12), "\n"))
			}
			wantOK, wantWait, margin := m.try(now, n)
			switch {
			case exact && !ok:
				fail("(true, 0s)", "the previous call was refused with the same n, and since then exactly the wait it gave has passed: "+retryAdvice(sleep, wait))
			case margin <= 1e-9*max(1, burst):
				// The bucket holds n tokens to within float rounding:
				// either answer is fine, as long as it is consistent.
				if ok && wait != 0 {
					fail("(true, 0s)", "a successful call waits 0")
				}
				if !ok && wait > 1+time.Duration(math.Ceil(1e-9*max(1, burst)/rate*1e9)) {
					fail(fmt.Sprintf("(%v, %v)", wantOK, wantWait), "the bucket holds n tokens to within rounding")
				}
			case ok != wantOK || !waitClose(wait, wantWait):
				fail(fmt.Sprintf("(%v, %v)", wantOK, wantWait), "")
			}
			retry = nil
			if ok {
				m.commit(now, n)
			} else if wait > 0 && wait < time.Hour {
				retry = &denial{key: key, n: n, wait: wait}
			}
		}
	}
}

type denial struct {
	key  string
	n    float64
	wait time.Duration
}

// randomN returns a request size: mostly 1, sometimes fractions, the whole
// burst, more than the burst, 0, or any real number up to the burst.
func randomN(rng *rand.Rand, burst float64) float64 {
	switch r := rng.IntN(100); {
	case r < 35:
		return 1
	case r < 45:
		return 0.5
	case r < 52:
		return 0.25
	case r < 60:
		return 2
	case r < 66:
		return burst
	case r < 70:
		return burst + 0.5
	case r < 73:
		return 0
	default:
		return rng.Float64() * burst
	}
}

// randomSleep returns how long to sleep before a call: often nothing, often
// a fraction of the time to refill, sometimes long enough to fill up.
func randomSleep(rng *rand.Rand, rate, burst float64) time.Duration {
	fill := time.Duration(burst / rate * 1e9) // empty to full
	switch r := rng.IntN(100); {
	case r < 30:
		return 0
	case r < 40:
		return time.Duration(rng.Int64N(1000)) // under a microsecond
	case r < 60:
		return time.Duration(rng.Int64N(int64(time.Duration(1e9/rate)) + 1)) // up to one token
	case r < 90:
		return time.Duration(rng.Int64N(int64(2*fill) + 1))
	default:
		return time.Hour
	}
}

// waitClose reports whether got is want to within 1ns either way, or equal
// for 0 and lab.InfDuration.
func waitClose(got, want time.Duration) bool {
	if want == 0 || want == lab.InfDuration {
		return got == want
	}
	return got >= want-1 && got <= want+1
}

func lastN(lines []string, n int) []string {
	if len(lines) > n {
		return append([]string{"  …"}, lines[len(lines)-n:]...)
	}
	return lines
}

// model is an exact token bucket: tokens and settings as rational numbers,
// time in whole nanoseconds. It is written independently of any solution.
type model struct {
	rate, burst big.Rat // tokens per second, tokens
	tokens      big.Rat // tokens held at last
	last        time.Duration
}

func newModel(rate, burst float64, now time.Duration) *model {
	m := &model{last: now}
	m.rate.SetFloat64(rate)
	m.burst.SetFloat64(burst)
	m.tokens.Set(&m.burst)
	return m
}

// at returns the tokens held at now: min(burst, tokens + rate×(now − last)).
func (m *model) at(now time.Duration) *big.Rat {
	r := new(big.Rat).SetFrac64(int64(now-m.last), 1e9)
	r.Mul(r, &m.rate)
	r.Add(r, &m.tokens)
	if r.Cmp(&m.burst) > 0 {
		r.Set(&m.burst)
	}
	return r
}

// try returns the exact answer to TryTake(n) at now, and margin, how far the
// tokens held are from n (+Inf when that does not matter).
func (m *model) try(now time.Duration, n float64) (ok bool, wait time.Duration, margin float64) {
	switch {
	case n <= 0:
		return true, 0, math.Inf(1)
	case !(n <= bigFloat(&m.burst)):
		return false, lab.InfDuration, math.Inf(1)
	}
	diff := m.at(now)
	diff.Sub(diff, new(big.Rat).SetFloat64(n)) // tokens − n
	margin = math.Abs(bigFloat(diff))
	if diff.Sign() >= 0 {
		return true, 0, margin
	}
	// wait = ⌈(n − tokens) × 1e9 / rate⌉ ns
	w := diff.Neg(diff)
	w.Mul(w, big.NewRat(1e9, 1))
	w.Quo(w, &m.rate)
	q, r := new(big.Int).QuoRem(w.Num(), w.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return false, lab.InfDuration, margin
	}
	return false, time.Duration(q.Int64()), margin
}

// commit spends n tokens at now; a take the limiter allowed at the edge of
// rounding cannot leave less than 0.
func (m *model) commit(now time.Duration, n float64) {
	if n <= 0 {
		return
	}
	t := m.at(now)
	t.Sub(t, new(big.Rat).SetFloat64(n))
	if t.Sign() < 0 {
		t.SetInt64(0)
	}
	m.tokens.Set(t)
	m.last = now
}

func bigFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}
