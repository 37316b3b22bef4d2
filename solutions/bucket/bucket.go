// Package bucket provides a token bucket rate limiter, alone or one per
// client key.
package bucket

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"ratelab/lab"
)

// Task 3 goal: build a token bucket that refills lazily, answers "yes now" or
// "not for another wait", and a keyed limiter that gives every client its own
// bucket without keeping one for every client it has ever seen.
//
// This is the reference solution. Where the exercise has a TODO(task3), it
// has a short explanation instead.

// A TokenBucket limits how often an event may happen. It holds at most burst
// tokens, starts full and gains rate tokens per second; an event of size n
// spends n tokens. Over any stretch of T seconds it lets through at most
// burst + rate×T tokens: rate is the average a busy caller gets, burst is how
// much a caller that has been quiet may spend at once.
//
// TryTake is the only method. It either spends the tokens now or reports how
// long until they will be there, which is what an HTTP server sends as
// Retry-After. Nothing runs in the background: each call works out what
// dripped in since the previous one.
//
// The zero value admits nothing (its rate and burst are 0); use
// NewTokenBucket. A TokenBucket is safe for concurrent use by multiple
// goroutines.
type TokenBucket struct {
	cfg config // set by NewTokenBucket, read-only afterwards

	mu sync.Mutex
	s  state // guarded by mu
}

// NewTokenBucket returns a full TokenBucket that holds at most burst tokens
// and refills at rate tokens per second. A rate of 0 never refills. It panics
// if rate or burst is negative or NaN.
func NewTokenBucket(rate, burst float64) *TokenBucket {
	// Full at creation: tokens = burst, counted as of now.
	return &TokenBucket{
		cfg: newConfig("NewTokenBucket", rate, burst),
		s:   state{tokens: burst, last: time.Now()},
	}
}

// TryTake spends n tokens if the bucket holds at least n now. It reports
// ok = true and wait = 0 when it does. Otherwise it changes nothing and
// returns false with wait, the time until the bucket will hold n tokens if
// nobody else takes any: (n − tokens)/rate seconds, rounded up to the next
// nanosecond, so a caller that sleeps exactly wait and retries succeeds. A
// wait that does not fit in a Duration (at a rate of 0, say) is
// lab.InfDuration.
//
// An n greater than the burst (or NaN) can never succeed: TryTake returns
// false, lab.InfDuration. An n of zero or less always succeeds and changes
// nothing. Fractional n are allowed.
func (b *TokenBucket) TryTake(n float64) (ok bool, wait time.Duration) {
	// Read the clock before locking, to keep the critical section short.
	// Another goroutine may then store a later time first, which is why
	// advance tolerates a now that is before last.
	now := time.Now()
	b.mu.Lock()
	ok, wait = b.s.take(&b.cfg, now, n)
	b.mu.Unlock()
	return ok, wait
}

// A KeyedLimiter gives every key, such as an API key or a client address,
// its own token bucket: each holds at most burst tokens, starts full on the
// key's first use and gains rate tokens per second. Keys never share tokens.
//
// A bucket that has refilled to full behaves exactly like a bucket that was
// never created, so the limiter forgets such buckets. Its memory therefore
// follows the number of keys that spent tokens in the last burst/rate seconds
// or so, not the number of distinct keys it has ever seen.
//
// The zero value admits nothing; use NewKeyedLimiter. A KeyedLimiter is safe
// for concurrent use by multiple goroutines.
type KeyedLimiter struct {
	cfg config // set by NewKeyedLimiter, read-only afterwards

	mu      sync.Mutex
	buckets map[string]state // guarded by mu; a missing key is a full bucket
	sweepAt int              // guarded by mu; len(buckets) that triggers a sweep
}

// minSweep is the fewest buckets a KeyedLimiter holds before it looks for
// full ones to drop.
const minSweep = 1024

// NewKeyedLimiter returns a KeyedLimiter whose buckets hold at most burst
// tokens and refill at rate tokens per second. It panics if rate or burst is
// negative or NaN.
func NewKeyedLimiter(rate, burst float64) *KeyedLimiter {
	// Buckets are created on first use, so the map starts empty.
	return &KeyedLimiter{
		cfg:     newConfig("NewKeyedLimiter", rate, burst),
		buckets: make(map[string]state),
		sweepAt: minSweep,
	}
}

// TryTake is TokenBucket.TryTake on the bucket of key: it spends n of that
// key's tokens or reports, without changing anything, how long until they
// will be there. The same rules apply for n greater than the burst, for n of
// zero or less and for fractional n.
func (l *KeyedLimiter) TryTake(key string, n float64) (ok bool, wait time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// A key without a bucket has a full one; store it only once it holds
	// less than burst, because a full bucket is the same as none. Before
	// adding a key, drop the full buckets if the map has grown past sweepAt,
	// max(1024, twice what the previous sweep kept). The map then never
	// holds more than that: about twice the keys that spent tokens within
	// burst/rate seconds before the previous sweep. A sweep visits sweepAt
	// buckets and comes after at least sweepAt/2 new keys, so it costs
	// amortised O(1) per new key and nothing on the path of a known key.
	s, found := l.buckets[key]
	if !found {
		s = state{tokens: l.cfg.burst, last: now}
	}
	ok, wait = s.take(&l.cfg, now, n)
	if !ok || n <= 0 { // take changed nothing
		return ok, wait
	}
	if !found {
		if len(l.buckets) >= l.sweepAt {
			l.sweep(now)
		}
		key = strings.Clone(key) // do not pin the caller's larger buffer
	}
	l.buckets[key] = s
	return ok, wait
}

// sweep drops the buckets that are full at now and sets the size of the next
// sweep to twice what is left, so the next one comes after at least as many
// inserts as this one visited buckets.
func (l *KeyedLimiter) sweep(now time.Time) {
	before := len(l.buckets)
	for key, s := range l.buckets {
		if s.advance(&l.cfg, now) >= l.cfg.burst {
			delete(l.buckets, key)
		}
	}
	after := len(l.buckets)
	if before > 8*minSweep && after < before/4 {
		// A Go map keeps its storage after deletes; copy the survivors so
		// a past flood of keys does not hold memory for ever.
		fresh := make(map[string]state, after)
		for key, s := range l.buckets {
			fresh[key] = s
		}
		l.buckets = fresh
	}
	l.sweepAt = max(minSweep, 2*after)
}

// config is what all the buckets of a limiter share.
type config struct {
	rate  float64 // tokens per second
	burst float64 // the most tokens a bucket holds
}

func newConfig(fn string, rate, burst float64) config {
	if !(rate >= 0 && burst >= 0) {
		panic(fmt.Sprintf("bucket: %s(rate=%v, burst=%v): rate and burst must be zero or more", fn, rate, burst))
	}
	return config{rate: rate, burst: burst}
}

// state is one bucket, refilled lazily: it held tokens at time last, and
// whatever dripped in since is worked out when it is next needed.
type state struct {
	tokens float64   // tokens held at last, never negative
	last   time.Time // when tokens was last brought up to date
}

// advance returns the tokens s holds at now under c: tokens plus what
// dripped in since last, capped at the burst. A now before last adds nothing,
// so a clock read that loses a race to the lock never takes tokens away.
// advance does not change s.
func (s *state) advance(c *config, now time.Time) float64 {
	elapsed := now.Sub(s.last)
	if elapsed <= 0 {
		return s.tokens
	}
	return min(s.tokens+elapsed.Seconds()*c.rate, c.burst)
}

// take is the core of both TryTake methods. It changes s only when it
// returns ok for an n greater than zero.
func (s *state) take(c *config, now time.Time, n float64) (ok bool, wait time.Duration) {
	switch {
	case n <= 0:
		return true, 0
	case !(n <= c.burst): // also catches NaN
		return false, lab.InfDuration
	}
	if tokens := s.advance(c, now); tokens >= n {
		s.tokens = tokens - n
		if now.After(s.last) {
			s.last = now
		}
		return true, 0
	}
	// Denied: leave s alone. Work the wait out from last, the instant the
	// stored tokens describe, then turn it into a wait from now.
	ready := s.readyAfter(c, n)
	elapsed := now.Sub(s.last)
	if ready == lab.InfDuration || (elapsed < 0 && ready > lab.InfDuration+elapsed) {
		return false, lab.InfDuration
	}
	return false, ready - elapsed
}

// maxWaitNs is the first float64 number of nanoseconds that does not fit in a
// Duration.
const maxWaitNs = float64(math.MaxInt64)

// readyAfter returns how long after last s will hold n tokens:
// (n − tokens)/rate seconds rounded up to the nanosecond, or lab.InfDuration
// if that does not fit in a Duration (a rate of 0, say).
func (s *state) readyAfter(c *config, n float64) time.Duration {
	ns := math.Ceil((n - s.tokens) / c.rate * 1e9)
	if !(ns < maxWaitNs) {
		return lab.InfDuration
	}
	d := time.Duration(ns)
	// Rounding in the float arithmetic can leave advance a hair below n at
	// exactly last+d. Step forward until advance, the check the retry will
	// make, agrees; steps double, so this ends fast for any rate.
	for step := time.Duration(1); s.advance(c, s.last.Add(d)) < n; step *= 2 {
		if d > lab.InfDuration-step {
			return lab.InfDuration
		}
		d += step
	}
	return d
}
