// Package redisbucket provides a token bucket rate limiter whose buckets live
// in Redis, so that every process of a service draws on the same bucket per
// key instead of each keeping its own.
package redisbucket

// Task 6 goal: move task 3's token bucket into Redis. Four worker processes
// that each keep their own buckets let a client through four times over; one
// bucket per key in Redis, updated by a Lua script that Redis runs as one
// indivisible step, holds the client to its rate however many processes
// serve it.
//
// The exercise is tokenbucket.lua, next to this file. This Go file is
// plumbing, the same in exercises/ and solutions/: you don't need to edit it.
// It embeds the script, runs it once per decision, turns its reply into
// (ok, wait), and answers from a local bucket when Redis fails.
//
// Run the tests with
//
//	go test -tags exercises ./exercises/redisbucket
//
// They use an embedded miniredis, and also a real Redis: the one at
// REDIS_URL, else a private redis-server they start when one is installed,
// else one at 127.0.0.1:6379 if it answers.

import (
	"context"
	_ "embed" // for the script
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"ratelab/lab"
	"ratelab/solutions/bucket"
)

//go:embed tokenbucket.lua
var source string

// script is tokenbucket.lua. Run sends EVALSHA with its SHA-1, and the whole
// script with EVAL only when Redis does not have it cached yet.
var script = redis.NewScript(source)

// KeyPrefix is put in front of every key a Limiter is given to name its
// bucket in Redis: the bucket of key "alice" is the hash
// "ratelab:bucket:alice".
const KeyPrefix = "ratelab:bucket:"

// DefaultTimeout is how long a decision may wait for Redis before the
// limiter gives up and answers locally. On one machine or rack a round trip
// takes well under a millisecond, so 200 ms only ever runs out when Redis is
// in trouble.
const DefaultTimeout = 200 * time.Millisecond

// DefaultBackoff is how long a Limiter answers locally, without trying Redis,
// after Redis failed.
const DefaultBackoff = 500 * time.Millisecond

// ErrFailOpen is wrapped by the error TryTakeCtx returns with a decision that
// did not come from Redis.
var ErrFailOpen = errors.New("redisbucket: redis failed, answered from the local bucket")

// A Limiter gives every key its own token bucket, kept in Redis: each holds
// at most burst tokens, starts full on the key's first use and gains rate
// tokens per second. All Limiters that use the same Redis and the same rate
// and burst share the buckets, whichever process they run in. Redis's own
// clock decides how much has dripped in, so the processes' clocks do not
// matter.
//
// Each decision is one round trip to Redis. A bucket that has refilled to
// full disappears from Redis by itself (the script sets an expiry), so Redis
// holds only the keys in recent use.
//
// When Redis fails (it is down, does not answer within the timeout, or the
// script returns an error or a reply it cannot read), the limiter fails open: it answers from a local token bucket per key with the
// same rate and burst, which bounds each process but not the service as a
// whole. It logs once when this starts and once when Redis answers again, and
// counts every such decision (see FailOpen). After a failure it does not try
// Redis again for the back-off (DefaultBackoff); then one call tries it while
// the others keep answering locally, so a dead or stuck Redis costs at most
// one timeout per back-off, not one per request.
//
// The client should have short timeouts of its own (see
// ratelab/internal/redisenv, which uses 200 ms) and respect context
// deadlines (redis.Options.ContextTimeoutEnabled); the limiter's own timeout
// only bounds a call through its context.
//
// A Limiter is safe for concurrent use by multiple goroutines.
type Limiter struct {
	rdb       redis.Scripter
	rateArg   string // the rate and burst as script arguments, formatted once
	burstArg  string
	backstop  *bucket.KeyedLimiter // the local buckets used while Redis fails
	log       *slog.Logger
	timeout   time.Duration
	backoff   time.Duration
	failOpen  atomic.Int64
	retryAt   atomic.Int64 // UnixNano before which Redis is not tried; 0 while it works
	down      atomic.Bool  // Redis failed and has not answered since (for logging)
	lastError atomic.Pointer[error]
}

// An Option changes a Limiter's defaults.
type Option func(*Limiter)

// WithLogger sends the limiter's two messages (Redis failed; Redis is back)
// to log instead of slog.Default(). A nil log discards them.
func WithLogger(log *slog.Logger) Option {
	return func(l *Limiter) {
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		l.log = log
	}
}

// WithTimeout sets how long one decision may wait for Redis before the
// limiter answers locally (DefaultTimeout if d ≤ 0).
func WithTimeout(d time.Duration) Option {
	return func(l *Limiter) {
		if d > 0 {
			l.timeout = d
		}
	}
}

// WithBackoff sets how long the limiter answers locally after a failure
// before it tries Redis again (DefaultBackoff if d ≤ 0).
func WithBackoff(d time.Duration) Option {
	return func(l *Limiter) {
		if d > 0 {
			l.backoff = d
		}
	}
}

// New returns a Limiter whose buckets live in rdb (a *redis.Client, say),
// hold at most burst tokens and refill at rate tokens per second. It panics
// if rate or burst is negative, infinite or NaN.
func New(rdb redis.Scripter, rate, burst float64, opts ...Option) *Limiter {
	if !(rate >= 0 && burst >= 0) || math.IsInf(rate, 0) || math.IsInf(burst, 0) {
		panic(fmt.Sprintf("redisbucket: New(rate=%v, burst=%v): rate and burst must be finite and zero or more", rate, burst))
	}
	// The script reads its arguments with tonumber. Plain decimals, never
	// exponents such as 1e+09, which miniredis's Lua cannot read.
	l := &Limiter{
		rdb:      rdb,
		rateArg:  strconv.FormatFloat(rate, 'f', -1, 64),
		burstArg: strconv.FormatFloat(burst, 'f', -1, 64),
		backstop: bucket.NewKeyedLimiter(rate, burst),
		log:      slog.Default(),
		timeout:  DefaultTimeout,
		backoff:  DefaultBackoff,
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// TryTake spends n tokens from key's bucket if it holds at least n now. It
// reports ok = true and wait = 0 when it does; otherwise it changes nothing
// and returns false with the time until the bucket will hold n tokens if
// nobody else takes any, never rounded down. An n greater than the burst can
// never succeed: TryTake returns false, lab.InfDuration. An n of zero or less
// always succeeds without asking Redis. These are the answers of task 3's
// KeyedLimiter.TryTake, and TryTake satisfies fakegpu.Limiter.
//
// TryTake is TryTakeCtx without a context and without its error: a decision
// made locally because Redis failed is returned like any other.
func (l *Limiter) TryTake(key string, n float64) (ok bool, wait time.Duration) {
	ok, wait, _ = l.TryTakeCtx(context.Background(), key, n)
	return ok, wait
}

// TryTakeCtx is TryTake with a context, and says where the answer came from.
// err is nil when Redis decided. When Redis failed, TryTakeCtx still returns
// a decision, from the local bucket, with an error that wraps ErrFailOpen and
// what went wrong. When ctx is done before Redis answers, it returns false, 0
// and ctx's error, and does not count Redis as failed: the caller gave up,
// Redis may be fine.
func (l *Limiter) TryTakeCtx(ctx context.Context, key string, n float64) (ok bool, wait time.Duration, err error) {
	switch {
	case n <= 0:
		return true, 0, nil
	case math.IsNaN(n) || math.IsInf(n, 1):
		return false, lab.InfDuration, nil
	}
	// During the back-off every call answers locally. When it ends, the one
	// call that wins the CompareAndSwap tries Redis and moves the end of the
	// back-off on, so the others keep answering locally meanwhile.
	if at := l.retryAt.Load(); at != 0 && !l.probe(at) {
		cause := errors.New("redis not tried during the back-off")
		if last := l.lastError.Load(); last != nil {
			cause = *last
		}
		return l.local(key, n, cause)
	}
	ok, wait, err = l.remote(ctx, key, n)
	switch {
	case err == nil:
		if l.retryAt.Load() != 0 {
			l.recovered()
		}
		return ok, wait, nil
	case ctx.Err() != nil:
		return false, 0, fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	l.failed(err)
	return l.local(key, n, err)
}

// probe reports whether this call should try Redis, now that it failed and
// the back-off ends at at (UnixNano): yes if the back-off is over and this
// call is the one that moves its end on.
func (l *Limiter) probe(at int64) bool {
	now := time.Now().UnixNano()
	return now >= at && l.retryAt.CompareAndSwap(at, now+int64(l.backoff))
}

// FailOpen returns how many decisions the limiter has made locally because
// Redis failed, since it was created.
func (l *Limiter) FailOpen() int64 { return l.failOpen.Load() }

// remote runs the script for key and n, and decodes its reply.
func (l *Limiter) remote(ctx context.Context, key string, n float64) (ok bool, wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	reply, err := script.Run(ctx, l.rdb, []string{KeyPrefix + key},
		l.rateArg, l.burstArg, strconv.FormatFloat(n, 'f', -1, 64)).Slice()
	if err != nil {
		if strings.Contains(err.Error(), lab.ErrNotImplemented.Error()) {
			// The stub's way of saying so: make it a lab.TODO like the
			// other tasks' stubs.
			return false, 0, fmt.Errorf("redisbucket: %w", &lab.TODO{Task: 6, What: "tokenbucket.lua"})
		}
		return false, 0, fmt.Errorf("redisbucket: run tokenbucket.lua: %w", err)
	}
	return decode(reply)
}

// decode turns the script's reply {allowed, wait} into TryTake's answer.
// allowed is 1 or 0; wait is milliseconds, as an integer or a decimal
// string, and any negative wait means never.
func decode(reply []any) (ok bool, wait time.Duration, err error) {
	bad := func(why string) (bool, time.Duration, error) {
		return false, 0, fmt.Errorf("redisbucket: tokenbucket.lua returned %#v: %s; want {allowed (1 or 0), wait in ms}", reply, why)
	}
	if len(reply) != 2 {
		return bad(fmt.Sprintf("%d values", len(reply)))
	}
	switch reply[0] {
	case int64(1):
		ok = true
	case int64(0):
	default:
		return bad("allowed is not 1 or 0 (Redis turns Lua true into 1 and false into nil)")
	}
	switch w := reply[1].(type) {
	case int64:
		wait = lab.InfDuration
		if w >= 0 && w <= maxMillis {
			wait = time.Duration(w) * time.Millisecond
		}
	case string:
		if wait, err = parseMillis(w); err != nil {
			return bad(err.Error())
		}
	default:
		return bad("the wait is neither an integer nor a string")
	}
	return ok, wait, nil
}

// parseMillis converts a number of milliseconds, such as "333.334", to a
// Duration, rounding any part of a nanosecond up. Plain decimals are
// converted exactly; anything else strconv.ParseFloat accepts, such as "-1",
// goes through millis.
func parseMillis(s string) (time.Duration, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if ms, err := strconv.ParseUint(whole, 10, 63); err == nil && digits(frac) {
		if ms > maxMillis {
			return lab.InfDuration, nil
		}
		// The first six decimals are nanoseconds; any digit after them
		// that is not 0 rounds up.
		ns := int64(ms) * int64(time.Millisecond)
		for i, unit := 0, int64(time.Millisecond); i < 6; i++ {
			unit /= 10
			if i < len(frac) {
				ns += int64(frac[i]-'0') * unit
			}
		}
		if len(frac) > 6 && strings.Trim(frac[6:], "0") != "" {
			ns++
		}
		return time.Duration(ns), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("the wait %q is not a number", s)
	}
	return millis(f), nil
}

// maxMillis is the largest whole number of milliseconds below lab.InfDuration.
const maxMillis = (math.MaxInt64 - 1_000_000) / 1_000_000

// millis converts f milliseconds to a Duration, rounding up to the
// nanosecond: a negative f or NaN is never (lab.InfDuration), and so is a
// wait too long for a Duration.
func millis(f float64) time.Duration {
	ns := math.Ceil(f * float64(time.Millisecond))
	if !(ns >= 0 && ns < float64(math.MaxInt64)) {
		return lab.InfDuration
	}
	return time.Duration(ns)
}

// digits reports whether s is made of ASCII digits only (or is empty).
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// local answers from the backstop and counts the decision.
func (l *Limiter) local(key string, n float64, cause error) (ok bool, wait time.Duration, err error) {
	l.failOpen.Add(1)
	ok, wait = l.backstop.TryTake(key, n)
	return ok, wait, fmt.Errorf("%w: %w", ErrFailOpen, cause)
}

// failed records that Redis failed with err: start the back-off, and log if
// Redis had been working.
func (l *Limiter) failed(err error) {
	l.lastError.Store(&err)
	l.retryAt.Store(time.Now().Add(l.backoff).UnixNano())
	if l.down.CompareAndSwap(false, true) {
		l.log.Warn("redisbucket: redis failed; failing open to a local token bucket per key until it answers again",
			"err", err, "retry_every", l.backoff)
	}
}

// recovered records that Redis answered after a failure.
func (l *Limiter) recovered() {
	l.retryAt.Store(0)
	if l.down.CompareAndSwap(true, false) {
		l.log.Info("redisbucket: redis answers again; deciding in redis", "fail_open_so_far", l.failOpen.Load())
	}
}
