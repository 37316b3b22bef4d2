// Package bucket provides a token bucket rate limiter, alone or one per
// client key.
package bucket

import (
	"time"

	"ratelab/lab"
)

// Task 3 goal: build a token bucket that refills lazily, answers "yes now" or
// "not for another wait", and a keyed limiter that gives every client its own
// bucket without keeping one for every client it has ever seen.
//
// Fill in every TODO(task3) below, then run
//
//	go test -tags exercises ./exercises/bucket
//
// The tests are shared with the reference solution; do not edit them. Read
// the clock with time.Now(): the tests run in a testing/synctest bubble, where
// time is fake and time.Sleep returns at once. You may add private types,
// functions and methods, such as one advance(now time.Time) that works out
// the refill in one place.

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
	// Goal: the state of one bucket, and what protects it.
	// TODO(task3): choose the fields. Two numbers describe the bucket's
	// content between calls; add the settings and a mutex.
}

// NewTokenBucket returns a full TokenBucket that holds at most burst tokens
// and refills at rate tokens per second. A rate of 0 never refills. It panics
// if rate or burst is negative or NaN.
func NewTokenBucket(rate, burst float64) *TokenBucket {
	// Goal: a bucket that is full now.
	// TODO(task3): check the arguments, set your fields, remove the panic.
	lab.NotImplemented(3, "NewTokenBucket")
	return nil
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
	// Goal: add what dripped in since the last update (capped at burst),
	// then take n or say how long until n will be there.
	// TODO(task3): implement the lazy refill and the decision; a denied call
	// must leave the bucket exactly as it was.
	lab.NotImplemented(3, "TokenBucket.TryTake")
	return false, 0
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
	// Goal: one bucket per key, without one per key ever seen.
	// TODO(task3): choose the fields: the settings, the buckets by key, a
	// mutex, and whatever you need to decide when to drop full buckets.
}

// NewKeyedLimiter returns a KeyedLimiter whose buckets hold at most burst
// tokens and refill at rate tokens per second. It panics if rate or burst is
// negative or NaN.
func NewKeyedLimiter(rate, burst float64) *KeyedLimiter {
	// Goal: a limiter with no buckets yet.
	// TODO(task3): check the arguments, set your fields, remove the panic.
	lab.NotImplemented(3, "NewKeyedLimiter")
	return nil
}

// TryTake is TokenBucket.TryTake on the bucket of key: it spends n of that
// key's tokens or reports, without changing anything, how long until they
// will be there. The same rules apply for n greater than the burst, for n of
// zero or less and for fractional n.
func (l *KeyedLimiter) TryTake(key string, n float64) (ok bool, wait time.Duration) {
	// Goal: the same answer as a TokenBucket per key, in bounded memory.
	// TODO(task3): find or create the key's bucket and take from it. When
	// the map grows large, drop the buckets that are full again, in a way
	// that costs O(1) per call on average.
	lab.NotImplemented(3, "KeyedLimiter.TryTake")
	return false, 0
}
