// Package counting provides four per-client rate limiters that each allow a
// key at most limit requests per window and count them in four different
// ways: FixedWindow, SlidingLog, SlidingCounter and TokenBucket. They share
// one method, Allow, and so one interface, Limiter.
package counting

import (
	"time"

	"ratelab/lab"
)

// Task 8 goal: count "limit requests per window" per client in the four
// classic ways, side by side, with the same method and the same promises,
// so that their differences (the boundary burst, the synchronised return,
// memory per client, exactness) come from the counting alone.
//
// Fill in every TODO(task8) below, then run
//
//	go test -tags exercises ./exercises/counting
//
// The tests are shared with the reference solution; do not edit them. Read
// the clock with time.Now(): the tests run in testing/synctest bubbles,
// where time is fake and time.Sleep returns at once, so a one-hour window
// is checked to the nanosecond in no real time. Time.UnixNano gives the
// Unix nanoseconds the windows are aligned on.
//
// Given, because it is the contract rather than the lesson: the Limiter
// interface. Everything else is yours. You may add private types, functions
// and methods, such as one helper that splits an instant into its window
// and the time since the window started, or one that forgets the keys whose
// requests no longer count. Task 3's token bucket is the model for the
// fourth limiter; this one counts in whole requests per window, which lets
// you keep its arithmetic exact in integers.

// A Limiter allows each key, such as an API key or a client address, at
// most a number of requests per window. FixedWindow, SlidingLog,
// SlidingCounter and TokenBucket are Limiters; they differ in how they
// count, and so in what they let through around the edges of a window and
// in the memory they keep per key.
//
// Allow decides one request of key now, as time.Now reads it. If the
// request is admitted, Allow counts it and returns ok = true and wait = 0.
// Otherwise Allow changes nothing (a refused request is not counted) and
// returns false with wait, the shortest whole number of nanoseconds after
// which the same request would be admitted if no other request of key is
// admitted meanwhile: a caller that sleeps exactly wait and retries is
// admitted, one that retries a nanosecond sooner is not. An HTTP server
// rounds wait up to whole seconds for Retry-After.
//
// Keys are independent: one key's requests never change the answers for
// another. Every Limiter is safe for concurrent use by multiple goroutines,
// runs nothing in the background, and forgets a key once its past requests
// no longer count, so its memory follows the keys that made requests in the
// last window or two, not every key it has ever seen.
type Limiter interface {
	Allow(key string) (ok bool, wait time.Duration)
}

// A FixedWindow counts each key's requests per window, one counter per key
// per window, and admits a request while the key's counter for the current
// window is below limit. Windows are aligned on the Unix epoch: window k is
// [k×window, (k+1)×window) in nanoseconds since 1970-01-01 UTC, so with a
// one-minute window every key's windows start at the top of every minute.
// A counter is forgotten when its window ends.
//
// One integer per key makes it the cheapest of the four, but it is exact
// only within a window. A key may send limit requests at the end of one
// window and limit more at the start of the next: up to 2 × limit within a
// stretch much shorter than a window. And every key's counter restarts at
// the same instant, so keys that were refused all come back together at
// the top of the window; each refusal's wait is the time to that instant.
//
// A FixedWindow is a Limiter, safe for concurrent use; make one with
// NewFixedWindow.
type FixedWindow struct {
	// Goal: a count per key for the current window, and nothing older.
	// TODO(task8): choose the fields: the settings, the counts by key,
	// which window they belong to, and a mutex.
}

// NewFixedWindow returns a FixedWindow that admits at most limit requests
// per key in each window of length window. It panics if limit is less than
// 1, window is not positive, or limit × window does not fit in a
// time.Duration (about 292 years).
func NewFixedWindow(limit int, window time.Duration) *FixedWindow {
	// Goal: a limiter with nothing counted yet.
	// TODO(task8): check the settings, set your fields, remove the panic.
	lab.NotImplemented(8, "NewFixedWindow")
	return nil
}

// Allow admits one request of key if fewer than limit were admitted in the
// current window, or returns false and the time until the window ends. See
// Limiter for the contract.
func (l *FixedWindow) Allow(key string) (ok bool, wait time.Duration) {
	// Goal: find the window now falls in, drop the counts of an older one,
	// then count the request or say how long until the window ends.
	// TODO(task8): implement it; a refused request must not be counted.
	lab.NotImplemented(8, "FixedWindow.Allow")
	return false, 0
}

// A SlidingLog keeps the time of every request it admitted for a key while
// that request still counts, and admits a request while fewer than limit
// count. A request admitted at t counts at now if now − window < t ≤ now:
// it stops counting exactly one window after it was admitted.
//
// It is exact: in any stretch of one window's length a key gets at most
// limit requests, wherever the stretch starts. The price is memory, one
// timestamp per counted request: up to limit per key, 80 kB for a key at a
// limit of 10,000 per minute. A refused request waits until the oldest
// counted one stops counting.
//
// A SlidingLog is a Limiter, safe for concurrent use; make one with
// NewSlidingLog.
type SlidingLog struct {
	// Goal: per key, the times of its requests that still count.
	// TODO(task8): choose the fields: the settings, the logs by key, a
	// mutex, and whatever you need to forget keys whose logs emptied.
}

// NewSlidingLog returns a SlidingLog that admits at most limit requests per
// key in any stretch of length window. It panics if limit is less than 1,
// window is not positive, or limit × window does not fit in a
// time.Duration.
func NewSlidingLog(limit int, window time.Duration) *SlidingLog {
	// Goal: a limiter with empty logs.
	// TODO(task8): check the settings, set your fields, remove the panic.
	lab.NotImplemented(8, "NewSlidingLog")
	return nil
}

// Allow admits one request of key if fewer than limit of its requests
// admitted in the last window still count, or returns false and the time
// until the oldest of them stops counting. See Limiter for the contract.
func (l *SlidingLog) Allow(key string) (ok bool, wait time.Duration) {
	// Goal: drop the timestamps that stopped counting, then count what is
	// left against limit.
	// TODO(task8): implement it. Keep the log bounded: a key never needs
	// more than limit timestamps, however long it keeps sending.
	lab.NotImplemented(8, "SlidingLog.Allow")
	return false, 0
}

// A SlidingCounter estimates how many requests of a key the last window
// holds from two counters, the key's count in the current window and in
// the previous one, assuming the previous window's requests were spread
// evenly over it. Windows are aligned on the Unix epoch, as FixedWindow's.
// With cur and prev the key's counts and elapsed the time since the
// current window started, the estimate is
//
//	prev × (window − elapsed)/window + cur
//
// (the previous window weighted by the share of it still in view), and a
// request is admitted if the estimate including it stays within limit:
// prev × (window − elapsed) + (cur+1) × window ≤ limit × window, computed
// exactly in integers.
//
// Two integers per key, and close to the log's answers on most traffic.
// It is not exact: in a stretch (t − window, t] a key gets at most
// limit + ⌊prev × e/window⌋ requests, where prev is its count in the window
// before t's and e is how far t is into its own window. That is limit when
// the previous window's requests were spread evenly and approaches
// 2 × limit only when a whole limit arrived at the very end of a window.
// A refusal's wait is the time until the weight of the previous window
// has fallen far enough, or until the next window when the current one is
// full.
//
// A SlidingCounter is a Limiter, safe for concurrent use; make one with
// NewSlidingCounter.
type SlidingCounter struct {
	// Goal: per key, two counts: this window's and the previous one's.
	// TODO(task8): choose the fields: the settings, the counts, which
	// window they belong to, and a mutex.
}

// NewSlidingCounter returns a SlidingCounter that admits a request of a key
// while its estimated count over the last window, this request included,
// is at most limit. It panics if limit is less than 1, window is not
// positive, or limit × window does not fit in a time.Duration.
func NewSlidingCounter(limit int, window time.Duration) *SlidingCounter {
	// Goal: a limiter with nothing counted yet.
	// TODO(task8): check the settings, set your fields, remove the panic.
	lab.NotImplemented(8, "NewSlidingCounter")
	return nil
}

// Allow admits one request of key if the estimate of the last window's
// requests, this one included, is at most limit, or returns false and the
// time until it would be. See Limiter for the contract.
func (l *SlidingCounter) Allow(key string) (ok bool, wait time.Duration) {
	// Goal: move the counts on when a new window starts, then compare the
	// estimate with limit, in integers.
	// TODO(task8): implement the decision and the wait. The wait is the
	// first instant at which the inequality holds: solve it for elapsed in
	// this window, or, when this window is full, in the next one, where
	// this window's count becomes the previous count.
	lab.NotImplemented(8, "SlidingCounter.Allow")
	return false, 0
}

// A TokenBucket gives each key a token bucket with the same long-run
// average as the other limiters: it gains limit tokens per window, added
// continuously (a rate of limit/window per second), holds at most burst
// tokens and starts full; each request takes one token. Its wait is
// (1 − tokens) × window/limit, rounded up to the nanosecond.
//
// In any stretch of time T a key gets at most burst + limit × T/window
// requests: burst sets how lumpy the traffic may be, limit/window its
// average. A key quiet for a while may send burst requests at once, and a
// busy one gets exactly one every window/limit. Two numbers per key. A
// bucket that has refilled is the same as a key never seen; since burst is
// at most limit, that happens within one window of the key's last request.
//
// A TokenBucket is a Limiter, safe for concurrent use; make one with
// NewTokenBucket, usually with DefaultBurst(limit).
type TokenBucket struct {
	// Goal: per key, a bucket refilled lazily, as in task 3.
	// TODO(task8): choose the fields: the settings, the buckets by key, a
	// mutex, and whatever you need to forget buckets that are full again.
}

// NewTokenBucket returns a TokenBucket whose buckets gain limit tokens per
// window and hold at most burst. It panics if limit is less than 1, window
// is not positive, limit × window does not fit in a time.Duration, or burst
// is not between 1 and limit.
func NewTokenBucket(limit int, window time.Duration, burst int) *TokenBucket {
	// Goal: a limiter whose every bucket starts full.
	// TODO(task8): check the settings, set your fields, remove the panic.
	lab.NotImplemented(8, "NewTokenBucket")
	return nil
}

// DefaultBurst returns the burst this lab gives a TokenBucket that allows
// limit requests per window: your choice, between 1 and limit, with the
// reason for it in this comment.
func DefaultBurst(limit int) int {
	// Goal: choose how lumpy a client's traffic may be, on purpose.
	// TODO(task8): pick a burst for this limit and explain the choice in
	// the comment above: how many requests may arrive at once, the most
	// any stretch of one window then holds (burst + limit), and how long a
	// refused client waits. Remove the panic.
	lab.NotImplemented(8, "DefaultBurst")
	return 0
}

// Allow admits one request of key if its bucket holds a token, or returns
// false and the time until it will. See Limiter for the contract.
func (l *TokenBucket) Allow(key string) (ok bool, wait time.Duration) {
	// Goal: task 3's lazy refill and decision, for one token, per key.
	// TODO(task8): implement it. Floating-point tokens make the wait a
	// hair short or long; counting tokens in units of 1/window token makes
	// the refill limit units per nanosecond, and everything exact.
	lab.NotImplemented(8, "TokenBucket.Allow")
	return false, 0
}
