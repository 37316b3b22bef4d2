// Package counting provides four per-client rate limiters that each allow a
// key at most limit requests per window and count them in four different
// ways: FixedWindow, SlidingLog, SlidingCounter and TokenBucket. They share
// one method, Allow, and so one interface, Limiter.
package counting

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Task 8 goal: count "limit requests per window" per client in the four
// classic ways, side by side, with the same method and the same promises,
// so that their differences (the boundary burst, the synchronised return,
// memory per client, exactness) come from the counting alone.
//
// This is the reference solution. Where the exercise has a TODO(task8), it
// has a short explanation instead.

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

// The four limiters are Limiters.
var (
	_ Limiter = (*FixedWindow)(nil)
	_ Limiter = (*SlidingLog)(nil)
	_ Limiter = (*SlidingCounter)(nil)
	_ Limiter = (*TokenBucket)(nil)
)

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
	cfg config // set by NewFixedWindow, read-only afterwards

	mu     sync.Mutex
	clock  clock            // read under mu, so that calls see time in order
	index  int64            // guarded by mu; the window counts belongs to
	counts map[string]int64 // guarded by mu; requests admitted in window index
}

// NewFixedWindow returns a FixedWindow that admits at most limit requests
// per key in each window of length window. It panics if limit is less than
// 1, window is not positive, or limit × window does not fit in a
// time.Duration (about 292 years).
func NewFixedWindow(limit int, window time.Duration) *FixedWindow {
	return &FixedWindow{
		cfg:    newConfig("NewFixedWindow", limit, window),
		clock:  newClock(),
		counts: make(map[string]int64),
	}
}

// Allow admits one request of key if fewer than limit were admitted in the
// current window, or returns false and the time until the window ends. See
// Limiter for the contract.
func (l *FixedWindow) Allow(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.now()
	index, elapsed := l.cfg.split(now)
	if index != l.index {
		// A new window: every count so far belongs to a window that has
		// ended. A fresh map, rather than clear, also gives back the
		// memory a flood of keys in the old window took.
		l.index = index
		l.counts = make(map[string]int64)
	}
	n := l.counts[key]
	if n >= l.cfg.limit {
		return false, time.Duration(l.cfg.window - elapsed)
	}
	if n == 0 {
		key = strings.Clone(key) // do not pin the caller's larger buffer
	}
	l.counts[key] = n + 1
	return true, 0
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
	cfg config // set by NewSlidingLog, read-only afterwards

	mu    sync.Mutex
	clock clock // read under mu, so that calls see time in order
	// The logs of keys that made a request in window index are in cur;
	// those whose last request was in the window before are in prev. A
	// key's timestamps are at most one window old when they count, so at
	// the start of window index+2 every log in prev has emptied: rotating
	// the maps forgets them without a sweep.
	index     int64              // guarded by mu
	cur, prev map[string][]int64 // guarded by mu; Unix nanoseconds, oldest first
}

// NewSlidingLog returns a SlidingLog that admits at most limit requests per
// key in any stretch of length window. It panics if limit is less than 1,
// window is not positive, or limit × window does not fit in a
// time.Duration.
func NewSlidingLog(limit int, window time.Duration) *SlidingLog {
	return &SlidingLog{
		cfg:   newConfig("NewSlidingLog", limit, window),
		clock: newClock(),
		cur:   make(map[string][]int64),
		prev:  make(map[string][]int64),
	}
}

// Allow admits one request of key if fewer than limit of its requests
// admitted in the last window still count, or returns false and the time
// until the oldest of them stops counting. See Limiter for the contract.
func (l *SlidingLog) Allow(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.now()
	index, _ := l.cfg.split(now)
	rotate(&l.index, &l.cur, &l.prev, index)
	log, found := l.cur[key]
	if !found {
		log = l.prev[key]
	}
	// Drop what stopped counting: timestamps up to now − window. The log
	// is in time order (the clock is read under the lock and never goes
	// back), so they are a prefix.
	i, _ := slices.BinarySearch(log, now-l.cfg.window+1)
	log = log[i:]
	if int64(len(log)) >= l.cfg.limit {
		// The limit is reached, so the log holds exactly limit requests,
		// and the first stops counting one window after it was admitted.
		// Nothing changes, so the pruned log need not be stored.
		return false, time.Duration(l.cfg.window - (now - log[0]))
	}
	// Appending past the slice's capacity copies the live part into a
	// new array, so the dropped prefix is not kept for long: a log never
	// holds much more than twice limit entries.
	log = append(log, now)
	if !found {
		delete(l.prev, key)
		key = strings.Clone(key)
	}
	l.cur[key] = log
	return true, 0
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
	cfg config // set by NewSlidingCounter, read-only afterwards

	mu        sync.Mutex
	clock     clock            // read under mu, so that calls see time in order
	index     int64            // guarded by mu; the window cur counts
	cur, prev map[string]int64 // guarded by mu; counts in windows index and index−1
}

// NewSlidingCounter returns a SlidingCounter that admits a request of a key
// while its estimated count over the last window, this request included,
// is at most limit. It panics if limit is less than 1, window is not
// positive, or limit × window does not fit in a time.Duration.
func NewSlidingCounter(limit int, window time.Duration) *SlidingCounter {
	return &SlidingCounter{
		cfg:   newConfig("NewSlidingCounter", limit, window),
		clock: newClock(),
		cur:   make(map[string]int64),
		prev:  make(map[string]int64),
	}
}

// Allow admits one request of key if the estimate of the last window's
// requests, this one included, is at most limit, or returns false and the
// time until it would be. See Limiter for the contract.
func (l *SlidingCounter) Allow(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.now()
	index, elapsed := l.cfg.split(now)
	rotate(&l.index, &l.cur, &l.prev, index)
	limit, window := l.cfg.limit, l.cfg.window
	cur, prev := l.cur[key], l.prev[key]
	room := limit - cur - 1 // requests the current window may still take after this one
	// Both sides are at most limit × window, which NewSlidingCounter
	// checked fits in an int64.
	if room >= 0 && prev*(window-elapsed) <= room*window {
		if cur == 0 {
			key = strings.Clone(key)
		}
		l.cur[key] = cur + 1
		return true, 0
	}
	if room >= 0 {
		// Only the previous window's weight is in the way, and it falls
		// as elapsed grows (prev > 0 here, or the request would pass).
		return false, time.Duration(admitFrom(window, prev, room) - elapsed)
	}
	// The current window is full (cur = limit). In the next one its count
	// becomes the previous count, against a fresh current count of 0. The
	// sum is at most 2 × window, which only a limit of 1 and a window over
	// 146 years takes past the largest Duration.
	d := uint64(window-elapsed) + uint64(admitFrom(window, cur, limit-1))
	return false, time.Duration(min(d, math.MaxInt64))
}

// admitFrom returns the first elapsed time in a window at which a key whose
// previous window held prev requests may make one more when room more are
// allowed: the least e with prev × (window − e) ≤ room × window. It is
// window itself, the start of the next window, when no e in this one will
// do.
func admitFrom(window, prev, room int64) int64 {
	if prev == 0 {
		return 0
	}
	// prev × (window − e) ≤ room × window ⇔ window − e ≤ ⌊room × window / prev⌋
	return window - room*window/prev
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
	cfg   config // set by NewTokenBucket, read-only afterwards
	burst int64  // tokens, set by NewTokenBucket

	mu    sync.Mutex
	clock clock // read under mu, so that calls see time in order
	// Buckets of keys that made a request in window index are in cur,
	// those whose last request was in the window before in prev; at the
	// start of window index+2 every bucket in prev is full again.
	index     int64                  // guarded by mu
	cur, prev map[string]bucketState // guarded by mu
}

// NewTokenBucket returns a TokenBucket whose buckets gain limit tokens per
// window and hold at most burst. It panics if limit is less than 1, window
// is not positive, limit × window does not fit in a time.Duration, or burst
// is not between 1 and limit.
func NewTokenBucket(limit int, window time.Duration, burst int) *TokenBucket {
	cfg := newConfig("NewTokenBucket", limit, window)
	if burst < 1 || burst > limit {
		panic(fmt.Sprintf("counting: NewTokenBucket(limit=%d, window=%v, burst=%d): burst must be between 1 and limit", limit, window, burst))
	}
	return &TokenBucket{
		cfg:   cfg,
		burst: int64(burst),
		clock: newClock(),
		cur:   make(map[string]bucketState),
		prev:  make(map[string]bucketState),
	}
}

// DefaultBurst returns the burst this lab gives a TokenBucket that allows
// limit requests per window, between 1 and limit: a tenth of limit,
// rounded up.
//
// Why a tenth: any stretch of one window then holds at most
// burst + limit = 1.1 × limit of a key's requests, close to the log's exact
// limit and far from the fixed window's 2 × limit, and a refused client
// waits window/limit for its next token instead of up to a whole window.
// Yet a client may still send a tenth of its allowance at once (600 of
// 6,000 per minute), enough for the batches honest clients send. A burst
// of limit would let a quiet client spend a whole window's allowance in
// one go, and then limit more over the next window; a burst of 1 would
// refuse every two requests sent together.
func DefaultBurst(limit int) int {
	return max(1, (limit-1)/10+1)
}

// Allow admits one request of key if its bucket holds a token, or returns
// false and the time until it will. See Limiter for the contract.
func (l *TokenBucket) Allow(key string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.now()
	index, _ := l.cfg.split(now)
	rotate(&l.index, &l.cur, &l.prev, index)
	b, found := l.cur[key]
	old := false
	if !found {
		if b, old = l.prev[key]; !old {
			b = bucketState{units: l.burst * l.cfg.window, last: now} // full
		}
	}
	// Tokens are counted in units of 1/window token, so that the limit
	// tokens a window adds are limit units per nanosecond: the arithmetic
	// is exact in integers, and a token is window units.
	units := b.at(&l.cfg, l.burst, now)
	if units < l.cfg.window {
		// ⌈(window − units)/limit⌉ nanoseconds until one token is there.
		return false, time.Duration((l.cfg.window-units-1)/l.cfg.limit + 1)
	}
	if !found {
		if old {
			delete(l.prev, key)
		}
		key = strings.Clone(key) // do not pin the caller's larger buffer
	}
	l.cur[key] = bucketState{units: units - l.cfg.window, last: now}
	return true, 0
}

// bucketState is one key's bucket, refilled lazily: it held units at last,
// and what dripped in since is worked out when it is next needed.
type bucketState struct {
	units int64 // tokens × window held at last, between 0 and burst × window
	last  int64 // Unix nanoseconds
}

// at returns the units b holds at now: what it held at last plus limit per
// nanosecond since, capped at burst × window. It does not change b.
func (b bucketState) at(c *config, burst, now int64) int64 {
	full := burst * c.window
	missing := full - b.units
	// Compare times rather than multiply, so that a long idle time cannot
	// overflow: the bucket is full once ⌈missing/limit⌉ nanoseconds passed.
	if missing == 0 || now-b.last > (missing-1)/c.limit {
		return full
	}
	return b.units + (now-b.last)*c.limit
}

// config is what every limiter is made with.
type config struct {
	limit  int64 // requests per window
	window int64 // nanoseconds
}

func newConfig(fn string, limit int, window time.Duration) config {
	if limit < 1 || window <= 0 || int64(window) > math.MaxInt64/int64(limit) {
		panic(fmt.Sprintf("counting: %s(limit=%d, window=%v): want limit ≥ 1, window > 0 and limit × window within a time.Duration", fn, limit, window))
	}
	return config{limit: int64(limit), window: int64(window)}
}

// split returns the window that now falls in, counted from the Unix epoch,
// and how far into that window now is.
func (c *config) split(now int64) (index, elapsed int64) {
	index, elapsed = now/c.window, now%c.window
	if elapsed < 0 { // before 1970: round towards minus infinity
		index, elapsed = index-1, elapsed+c.window
	}
	return index, elapsed
}

// rotate moves the pair of maps cur (state of keys seen in window *index)
// and prev (state of keys last seen in the window before) on to window
// index: when it is the next window, cur becomes prev and prev, which
// belongs to a window that is now two back, is dropped; when it is later
// still, both are. A fresh map, rather than clear, gives back the memory
// of a past flood of keys.
func rotate[S any](at *int64, cur, prev *map[string]S, index int64) {
	switch index {
	case *at:
		return
	case *at + 1:
		*prev, *cur = *cur, make(map[string]S)
	default:
		*prev, *cur = make(map[string]S), make(map[string]S)
	}
	*at = index
}

// clock reads the time as nanoseconds since the Unix epoch, moving with
// Go's monotonic clock after the first reading: a step of the wall clock
// (NTP, a person with a date command) neither moves every key's window nor
// takes time backwards, so a log stays in time order. Read it under the
// limiter's lock for the same reason.
type clock struct {
	start time.Time // carries the monotonic reading
	unix  int64     // start in Unix nanoseconds
}

func newClock() clock {
	now := time.Now()
	return clock{start: now, unix: now.UnixNano()}
}

func (c *clock) now() int64 {
	return c.unix + int64(time.Since(c.start))
}
