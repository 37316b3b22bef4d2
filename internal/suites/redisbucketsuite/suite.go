// Package redisbucketsuite is the one test suite of task 6 (a token bucket
// kept in Redis). The exercise and the reference solution each run it through
// a thin adapter, so both are held to exactly the same checks. Learners do not
// edit it.
//
// Every check runs twice, as subtests of two groups:
//
//	Miniredis/NAME  against an embedded miniredis, one per check, whose clock
//	                the suite sets (miniredis.SetTime moves what TIME returns,
//	                FastForward ages the keys' TTLs), so waits are exact; the
//	                clock starts at a random instant of the century
//	Redis/NAME      against a real Redis, the truth wherever the two differ
//	                (their Lua formats numbers differently): REDIS_URL if set;
//	                else a private redis-server the suite starts on a free
//	                loopback port and stops at the end, when redis-server is
//	                installed; else 127.0.0.1:6379 if it answers PING within
//	                200 ms. Skipped with a message when there is none, failed
//	                when REDIS_URL is set but does not answer, and skipped on
//	                purpose with REDIS_URL=off. The log says which Redis judged.
//
// The checks, by NAME:
//
//	StartsFull        a new key holds burst tokens; keys are independent
//	RefillsAtRate     tokens drip in at rate per second; at a rate of 0 none
//	                  do (a random burst): never more than burst, never a
//	                  finite wait
//	CapsAtBurst       an idle bucket never holds more than burst
//	ExactWait         the wait is (n − tokens)/rate, never rounded down, and
//	                  a caller that sleeps it then gets in (fixed and random
//	                  cases)
//	FractionalTokens  fractional n and a fractional burst
//	MoreThanBurst     n > burst can never succeed: (false, lab.InfDuration),
//	                  and with a burst of 0 no n > 0 ever does
//	Expiry            the key has a TTL, refreshed on every take, that
//	                  outlives the refill and not by more than a second; an
//	                  idle key disappears (a random bucket)
//	Keyspace          150 to 800 keys (how many is random): each bucket keeps
//	                  its state, Redis holds one key per bucket and nothing
//	                  else, each with such a TTL, and none once idle
//	Model             random buckets and sequences of calls on a few keys,
//	                  the script called in MULTI/EXEC with TIME around every
//	                  call, judged against a model by Redis's own clock to
//	                  the microsecond, with the key's PTTL after each take
//	RedisClock        the script reads Redis's clock (TIME) and no time from
//	                  the caller; on miniredis, that clock also steps back
//	                  (suitekit.ClockSteps) and no time it covers twice
//	                  drips in twice
//	Atomicity         32 goroutines on 2 clients never get more than
//	                  burst + rate × elapsed from a key, draining one new
//	                  key after another
//	FailOpen          Redis refusing or hanging mid-run: answers from the
//	                  local bucket within its bound, every call quick, one log
//	                  line, a counter, and back to Redis when it returns;
//	                  then, with script calls failing or hanging by a hook
//	                  on the client, the error wraps the failure that
//	                  started the back-off, during the back-off too, and
//	                  when it ends exactly one of 8 to 24 concurrent
//	                  callers tries Redis
//
// Wherever a decision admits, its wait must be 0.
//
// Every random input comes from the run's seed (suitekit.Rand, and rapid's
// -rapid.seed for Model), printed when a check fails.
//
// A real Redis cannot be given a fake clock, so there the checks other than
// Model sleep for real (a few seconds in all) and allow for the time the
// calls themselves take: a wait may then be shorter than the ideal by at
// most the time that has passed beyond the planned sleeps (by Redis's own
// clock, read with TIME), never longer than the ideal plus 1 ms. When that
// slack leaves an answer undecided, the check starts again on fresh keys,
// and is skipped after three tries. Every check uses keys of its own,
// random letters under a prefix unique to the run, and deletes them when
// it ends.
//
// Every call into the code under test goes through a helper that turns a
// panic into a failure of that subtest only.
package redisbucketsuite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"ratelab/internal/redisenv"
	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// Limiter is the part of a Redis-backed limiter the suite drives.
type Limiter interface {
	// TryTake spends n tokens from key's bucket or reports how long until
	// they will be there, as task 3's KeyedLimiter does.
	TryTake(key string, n float64) (ok bool, wait time.Duration)
	// TryTakeCtx is TryTake with a context; err is nil exactly when Redis
	// made the decision.
	TryTakeCtx(ctx context.Context, key string, n float64) (ok bool, wait time.Duration, err error)
	// FailOpen counts the decisions made locally because Redis failed.
	FailOpen() int64
}

// NewLimiter makes a Limiter on rdb with rate in tokens per second and burst
// in tokens, which logs to log.
type NewLimiter func(rdb *redis.Client, rate, burst float64, log *slog.Logger) Limiter

// Run runs every check of task 6 as subtests of t, under "Miniredis/" and
// "Redis/". script is the package's tokenbucket.lua, which some checks run
// directly; newLimiter builds the package's Limiter.
func Run(t *testing.T, script string, newLimiter NewLimiter) {
	redis.SetLogger(quiet{}) // go-redis would print every failed dial of FailOpen
	suitekit.NoteSeed(t)
	s := &suite{script: script, newLimiter: newLimiter, run: letters(suitekit.Rand(t), 10)}
	checks := []check{
		{"StartsFull", s.startsFull, after},
		{"RefillsAtRate", s.refillsAtRate, after},
		{"CapsAtBurst", s.capsAtBurst, after},
		{"ExactWait", s.exactWait, after},
		{"FractionalTokens", s.fractionalTokens, after},
		{"MoreThanBurst", s.moreThanBurst, after},
		{"Expiry", s.expiry, after},
		{"Keyspace", s.keyspace, alone},
		{"Model", s.model, after},
		{"RedisClock", s.redisClock, after},
		{"Atomicity", s.atomicity, after},
		{"FailOpen", s.failOpen, beside},
	}
	sideBySide := parallel() > 1
	real := realRedis(t)
	for _, b := range []backend{{name: "Miniredis"}, real} {
		t.Run(b.name, func(t *testing.T) {
			// The backends side by side: FailOpen waits out a hanging
			// Redis for seconds on the real clock in each, and nothing
			// else is shared but the run's key prefix. A crash while both
			// run is told apart by the grader (one test at a time).
			t.Parallel()
			if b.desc != "" {
				t.Logf("judged by %s", b.desc)
			}
			sub := func(c check) func(*testing.T) {
				return func(t *testing.T) {
					switch {
					case b.skip != "":
						t.Skip(b.skip)
					case b.fail != "":
						t.Fatal(b.fail)
					}
					e := s.env(t, b)
					e.decided(c.f)
				}
			}
			var besides sync.WaitGroup
			for _, c := range checks {
				if sideBySide && c.runs == beside {
					besides.Go(func() { t.Run(c.name, sub(c)) })
				}
			}
			for _, c := range checks {
				switch {
				case sideBySide && c.runs == beside:
					continue
				case c.runs == alone:
					besides.Wait()
				}
				t.Run(c.name, sub(c))
			}
			besides.Wait()
		})
	}
}

// A check is one subtest, run once per backend.
type check struct {
	name string
	f    func(e *env)
	runs company
}

// company says what a check may run beside, within its backend.
type company int

const (
	// after: one after another, in the order listed.
	after company = iota
	// beside: from the start, beside the others, when the tests may run
	// side by side (-parallel above 1): FailOpen, which waits out a
	// hanging Redis for about 4 s of the real clock, spends little CPU
	// doing it, and touches only keys of its own. On two cores that takes
	// a backend from about 8.5 s to 5.5 s under the race detector.
	beside
	// alone: once the checks beside have ended: Keyspace, which reads
	// every key in the server and wants no other check's among them.
	alone
)

// parallel returns go test's -parallel: 1 when the grader runs the suite
// one test at a time to tell which of two running tests crashed it.
func parallel() int {
	f := flag.Lookup("test.parallel")
	if f == nil {
		return 1
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil {
		return 1
	}
	return n
}

type suite struct {
	script     string
	newLimiter NewLimiter
	run        string // prefix of every key this run uses: random letters
	keys       atomic.Int64
}

// A backend is where the checks run: an embedded miniredis (url "") or a
// real Redis.
type backend struct {
	name       string
	url        string
	desc       string // which Redis, for the log
	skip, fail string // why the checks cannot run
}

// realRedis finds the real Redis to test against: REDIS_URL if set; else a
// private redis-server started for this run, when redis-server is
// installed; else one at 127.0.0.1:6379 if it answers. It returns the
// "Redis" backend, with why its checks are skipped or fail if there is
// none.
func realRedis(t *testing.T) backend {
	b := backend{name: "Redis"}
	url, set := os.LookupEnv("REDIS_URL")
	switch {
	case set && url == "off":
		b.skip = "REDIS_URL=off: the checks against a real Redis are turned off; the Miniredis ones ran"
		return b
	case url != "":
		b.url, b.desc = url, "the Redis at REDIS_URL="+url
	case redisenv.ServerAvailable():
		// Its own server: no other program's keys, nothing left behind.
		// It lives as long as the test binary's top-level test.
		srv, err := redisenv.StartServer(context.Background(), t.TempDir())
		if err != nil {
			b.fail = fmt.Sprintf("redis-server is installed but a private one would not start: %v\n"+
				"set REDIS_URL to a running Redis, or REDIS_URL=off to test against miniredis only", err)
			return b
		}
		t.Cleanup(srv.Stop)
		b.url, b.desc = srv.URL, srv.String()
		return b
	default:
		b.url, b.desc = "redis://127.0.0.1:6379", "the Redis at 127.0.0.1:6379 (no redis-server installed to start a private one)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, cleanup, err := redisenv.Open(ctx, b.url)
	if err != nil {
		if set {
			b.fail = fmt.Sprintf("REDIS_URL=%s did not answer PING within 200 ms: %v\nstart that server, or unset REDIS_URL to test against a private redis-server (or miniredis only)", url, err)
			return b
		}
		b.skip = "no redis-server is installed and no Redis answered PING at 127.0.0.1:6379 within 200 ms, so only the Miniredis checks ran. " +
			"To run these too, install Redis (redis-server in PATH: the checks start a private one) or set REDIS_URL"
		return b
	}
	cleanup()
	return b
}

// letters returns n random lowercase letters: key names that say nothing
// about the check that uses them.
func letters(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// --- The environment of one check ---

// env is one check on one backend: its server, a client of its own for
// looking at keys, its keys, and its clock.
type env struct {
	t        *testing.T
	s        *suite
	mr       *miniredis.Miniredis // nil on a real Redis
	url      string               // the server, as redis://host:port
	rdb      *redis.Client        // for the check's own commands, not for limiters (ownClient)
	prefix   string               // every key of the current attempt starts with it
	prefixes []string             // every attempt's prefix, for the cleanup
	rng      *rand.Rand           // the check's random inputs, from the run's seed

	clock   time.Time     // what miniredis's TIME returns
	start   time.Time     // Redis's clock (TIME) just before the attempt's first call
	begun   bool          // whether start is set
	planned time.Duration // the sum of advance calls in this attempt
}

// randomInstant returns a time for miniredis's clock: any second of this
// century, its microseconds often few (under 1,000 or under 100,000, as
// TIME's second field then has fewer than six digits) and otherwise any.
// A script that only works at some times, or loses the microseconds, or
// glues TIME's two fields together as text, shows it somewhere.
func randomInstant(rng *rand.Rand) time.Time {
	first := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	last := time.Date(2099, 12, 31, 0, 0, 0, 0, time.UTC).Unix()
	sec := first + rng.Int64N(last-first)
	var us int64
	switch rng.IntN(3) {
	case 0:
		us = rng.Int64N(1000)
	case 1:
		us = rng.Int64N(100_000)
	default:
		us = rng.Int64N(1_000_000)
	}
	return time.Unix(sec, us*1000).UTC()
}

func (s *suite) env(t *testing.T, b backend) *env {
	t.Helper()
	e := &env{t: t, s: s, url: b.url, rng: suitekit.Rand(t)}
	if b.url == "" {
		e.mr = miniredis.NewMiniRedis()
		if err := e.mr.Start(); err != nil {
			t.Fatalf("start miniredis: %v", err)
		}
		t.Cleanup(e.mr.Close)
		e.url = "redis://" + e.mr.Addr()
		e.clock = randomInstant(e.rng)
		e.mr.SetTime(e.clock)
	}
	e.rdb = e.ownClient()
	if e.mr == nil {
		// Only the keys of its own attempts: a check beside it uses the
		// same Redis.
		t.Cleanup(func() {
			for _, p := range e.prefixes {
				deleteKeys(e.rdb, "*"+p+"*")
			}
		})
	}
	e.fresh()
	return e
}

// fake reports whether the check runs on miniredis, whose clock it sets.
func (e *env) fake() bool { return e.mr != nil }

// fresh starts an attempt: new keys, and the clock counted from the next
// call (until then every key is a full bucket, however long it takes). The
// keys are the run's random prefix and a few more random letters, so they
// say nothing about which check uses them.
func (e *env) fresh() {
	e.prefix = fmt.Sprintf("%s%s%d:", e.s.run, letters(e.rng, 4), e.s.keys.Add(1))
	e.prefixes = append(e.prefixes, e.prefix)
	e.begun = false
	e.planned = 0
}

// begin notes the time of the attempt's first call to Redis, on a real
// Redis by Redis's own clock.
func (e *env) begin() {
	if !e.begun && !e.fake() {
		e.start, e.begun = e.serverNow(), true
	}
}

// serverNow reads a real Redis's clock with TIME on the check's own
// client: the clock the script reads, so that the slack measured by it
// holds whatever the machine's clocks do between them. A Redis that does
// not answer makes the attempt inconclusive.
func (e *env) serverNow() time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		panic(inconclusive{fmt.Sprintf("TIME on the check's own client: %v", err)})
	}
	return now
}

// key returns the full key for a check's short key name.
func (e *env) key(name string) string { return e.prefix + name }

// ownClient opens the check's own client of the server, for looking at
// keys and calling the script directly: the code under test is not behind
// it, so it waits for Redis as long as a busy machine needs.
func (e *env) ownClient() *redis.Client {
	e.t.Helper()
	opt := e.options()
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = 5*time.Second, 5*time.Second, 5*time.Second, 5*time.Second
	rdb := redis.NewClient(opt)
	e.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// client opens a client of the server with redisenv's short timeouts.
func (e *env) client() *redis.Client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rdb, _, cleanup, err := redisenv.Open(ctx, e.url)
	if err != nil {
		e.t.Fatalf("connect to %s: %v", e.url, err)
	}
	e.t.Cleanup(cleanup)
	return rdb
}

// advance lets d pass: on miniredis it moves the clock that TIME reads and
// ages every TTL by d, at once; on a real Redis it sleeps.
func (e *env) advance(d time.Duration) {
	e.planned += d
	if e.fake() {
		e.clock = e.clock.Add(d)
		e.mr.SetTime(e.clock)
		e.mr.FastForward(d)
		return
	}
	time.Sleep(d)
}

// jump moves miniredis's clock by d without ageing any TTL, so keys that
// would have expired are still there. It is only for miniredis.
func (e *env) jump(d time.Duration) {
	e.planned += d
	e.clock = e.clock.Add(d)
	e.mr.SetTime(e.clock)
}

// slack is how much more time may have passed on the server than the
// advances planned: 0 on miniredis; on a real Redis, all the time Redis's
// clock has counted since just before the attempt's first call beyond the
// sleeps asked for (the sleeps' overshoot and the calls themselves). Redis
// runs one command at a time, so TIME answered before a call was sent and
// after its reply came back brackets the TIME its script read.
func (e *env) slack() time.Duration {
	if e.fake() || !e.begun {
		return 0
	}
	return max(0, e.serverNow().Sub(e.start)-e.planned)
}

// at describes the planned time of the attempt, for messages.
func (e *env) at() string {
	if e.fake() {
		return fmt.Sprintf("at t=%v", e.planned)
	}
	return fmt.Sprintf("at t=%v (planned; %v really)", e.planned, (e.planned + e.slack()).Round(time.Microsecond))
}

// inconclusive is what a check panics with when a real Redis was too slow
// for an answer to be judged.
type inconclusive struct{ why string }

// attempts runs one scenario on fresh keys: once on miniredis; on a real
// Redis up to three times while the timing leaves an answer undecided, and
// then skips.
func (e *env) attempts(scenario func()) {
	e.t.Helper()
	e.fresh()
	var why string
	for try := range 3 {
		if try > 0 {
			e.fresh()
		}
		done := func() (ok bool) {
			defer func() {
				if r := recover(); r != nil {
					inc, isInc := r.(inconclusive)
					if !isInc {
						panic(r)
					}
					why = inc.why
				}
			}()
			scenario()
			return true
		}()
		if done || e.t.Failed() {
			return
		}
	}
	e.undecided(why)
}

// undecided ends a check that could not decide three times: a skip on a
// real Redis, whose timing a busy machine can upset; a failure on
// miniredis, whose clock the suite sets, so that only a script too slow
// to answer within the limiter's timeout can leave it undecided.
func (e *env) undecided(why string) {
	e.t.Helper()
	if e.fake() {
		e.t.Fatalf("three tries could not decide: %s\nthe limiter gives Redis %v per decision: a script that takes longer fails open", why, 200*time.Millisecond)
	}
	e.t.Skipf("this machine was too slow three times for the timing to decide: %s", why)
}

// decided runs a check, ending it as undecided if it gives up on timing
// outside attempts.
func (e *env) decided(check func(*env)) {
	e.t.Helper()
	defer func() {
		if r := recover(); r != nil {
			inc, isInc := r.(inconclusive)
			if !isInc {
				panic(r)
			}
			e.undecided(inc.why)
		}
	}()
	check(e)
}

// deleteKeys deletes every key that matches pattern.
func deleteKeys(rdb *redis.Client, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, pattern, 100).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// redisKey returns the Redis key whose name ends with the check's key name
// (the limiter adds a prefix of its own), or "" if there is none.
func (e *env) redisKey(name string) string {
	e.t.Helper()
	ctx := context.Background()
	var found []string
	iter := e.rdb.Scan(ctx, 0, "*"+e.key(name), 100).Iterator()
	for iter.Next(ctx) {
		found = append(found, iter.Val())
	}
	if err := iter.Err(); err != nil {
		e.t.Fatalf("SCAN for the key of %q: %v", name, err)
	}
	switch len(found) {
	case 0:
		return ""
	case 1:
		return found[0]
	}
	e.t.Fatalf("%d Redis keys end with %q: %q; want one hash per bucket", len(found), e.key(name), found)
	return ""
}

// --- Calling the code under test ---

// errReport describes an error that should not have happened: just the TODO
// message for a stub, the error and a word on it otherwise.
func errReport(call string, err error) string {
	var todo *lab.TODO
	if errors.As(err, &todo) {
		return todo.Error()
	}
	return fmt.Sprintf("%s returned the error %v\nthe decision must come from Redis: check that tokenbucket.lua runs (redis-cli EVAL \"$(cat tokenbucket.lua)\" 1 somekey 1 2 1) and returns {allowed, wait}", call, err)
}

// lim wraps a Limiter under test for one check. Its methods take the check's
// short key names.
type lim struct {
	e *env
	l Limiter
}

// limiter makes a Limiter with its own client, as another process would
// have, that logs to log (nowhere if nil).
func (e *env) limiter(rate, burst float64, log *slog.Logger) *lim {
	e.t.Helper()
	return e.limiterOn(e.client(), rate, burst, log)
}

func (e *env) limiterOn(rdb *redis.Client, rate, burst float64, log *slog.Logger) *lim {
	e.t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var l Limiter
	if r, stack := suitekit.Catch(func() { l = e.s.newLimiter(rdb, rate, burst, log) }); r != nil {
		e.t.Fatal(suitekit.PanicReport(fmt.Sprintf("New(rdb, %v, %v)", rate, burst), r, stack))
	}
	if l == nil {
		e.t.Fatalf("New(rdb, %v, %v) = nil; want a limiter", rate, burst)
	}
	return &lim{e: e, l: l}
}

// try calls TryTakeCtx(key, n) and returns whatever it returns.
func (x *lim) try(ctx context.Context, name string, n float64) (ok bool, wait time.Duration, err error) {
	x.e.t.Helper()
	x.e.begin()
	if r, stack := suitekit.Catch(func() { ok, wait, err = x.l.TryTakeCtx(ctx, x.e.key(name), n) }); r != nil {
		x.e.t.Fatal(suitekit.PanicReport(fmt.Sprintf("TryTakeCtx(%q, %v)", name, n), r, stack))
	}
	return ok, wait, err
}

// take calls TryTakeCtx(key, n) and fails the check unless Redis decided.
func (x *lim) take(name string, n float64) (ok bool, wait time.Duration) {
	x.e.t.Helper()
	ok, wait, err := x.try(context.Background(), name, n)
	if err != nil {
		if timedOut(err) {
			// A busy machine: the call may or may not have spent tokens,
			// so the attempt starts again on fresh keys.
			panic(inconclusive{fmt.Sprintf("TryTakeCtx(%q, %v) did not get an answer from Redis in time: %v", name, n, err)})
		}
		x.e.t.Fatal(errReport(fmt.Sprintf("%s: TryTakeCtx(%q, %v)", x.e.at(), name, n), err))
	}
	return ok, wait
}

// failOpen calls FailOpen.
func (x *lim) failOpen() (count int64) {
	x.e.t.Helper()
	if r, stack := suitekit.Catch(func() { count = x.l.FailOpen() }); r != nil {
		x.e.t.Fatal(suitekit.PanicReport("FailOpen()", r, stack))
	}
	return count
}

// expect calls TryTakeCtx(key, n) and fails the check unless it returns
// (wantOK, wantWait), where wantWait is the exact wait rounded up to the
// nanosecond. A refusal may round its wait up by up to a millisecond, never
// down. On a real Redis, where more time may have passed than was planned,
// the wait may also be shorter by the slack, and an answer that the slack
// leaves undecided makes the attempt inconclusive.
func (x *lim) expect(name string, n float64, wantOK bool, wantWait time.Duration, why string) {
	x.e.t.Helper()
	ok, wait := x.take(name, n)
	slack := x.e.slack()
	fail := func(extra string) {
		x.e.t.Helper()
		x.e.t.Fatalf("%s: TryTake(%q, %v) = (%v, %s); want (%v, %s)\n%s%s", x.e.at(), name, n, ok, fmtWait(wait), wantOK, fmtWait(wantWait), why, extra)
	}
	switch {
	case wantOK:
		if !ok || wait != 0 {
			fail("")
		}
	case wantWait == lab.InfDuration:
		if ok || wait != lab.InfDuration {
			fail("\n(the script's sentinel for \"never\", such as -1, must reach Go, which turns it into lab.InfDuration)")
		}
	case ok:
		if slack >= wantWait {
			panic(inconclusive{fmt.Sprintf("TryTake(%q, %v) was due to be refused for %v more, but %v more than planned had passed", name, n, wantWait, slack)})
		}
		fail("")
	case wait < wantWait-slack:
		if slack > 0 {
			fail(fmt.Sprintf("\nthe wait is too short even allowing for the %v that passed beyond the planned sleeps: never round a wait down", slack))
		}
		fail("\nthe wait is too short: round it up, never down (a caller that sleeps it must then get in), and keep the microseconds of Redis's clock.\n" +
			"(On miniredis the suite sets Redis's clock and holds it still between the planned steps: a wait that shrinks anyway comes from a clock other than redis.call('TIME').)")
	case wait > wantWait+time.Millisecond:
		fail("\nthe wait is too long: it is (n − tokens)/rate, rounded up by at most a millisecond")
	}
}

// fmtWait formats a wait, naming lab.InfDuration.
func fmtWait(d time.Duration) string {
	if d == lab.InfDuration {
		return "lab.InfDuration"
	}
	return d.String()
}

// drain takes 1 token count times and expects each to succeed.
func (x *lim) drain(name string, count int, why string) {
	x.e.t.Helper()
	for range count {
		x.expect(name, 1, true, 0, why)
	}
}

// --- The checks ---

func (s *suite) startsFull(e *env) {
	e.attempts(func() {
		x := e.limiter(2, 5, nil)
		x.drain("a", 5, "a new key has a full bucket: burst=5 calls in a row succeed, with wait 0")
		x.expect("a", 1, false, 500*time.Millisecond, "the 6th call finds the bucket empty; one token takes 1/rate = 500ms")
		x.expect("b", 5, true, 0, "another key has its own full bucket of burst=5")
		x.expect("b", 0.5, false, 250*time.Millisecond, "key b is empty now; half a token takes 250ms")
		x.expect("a", 1, false, 500*time.Millisecond, "key a is still empty; b's use must not touch it")

		// TryTake, which the server calls, gives the same answers.
		var ok bool
		var wait time.Duration
		if r, stack := suitekit.Catch(func() { ok, wait = x.l.TryTake(e.key("c"), 5) }); r != nil {
			e.t.Fatal(suitekit.PanicReport(`TryTake("c", 5)`, r, stack))
		}
		if !ok || wait != 0 {
			e.t.Fatalf("%s: TryTake(%q, 5) = (%v, %v); want (true, 0s)\na new key has a full bucket, and TryTake answers like TryTakeCtx", e.at(), "c", ok, wait)
		}
	})
}

func (s *suite) refillsAtRate(e *env) {
	e.attempts(func() {
		x := e.limiter(10, 3, nil) // one token every 100ms
		x.drain("k", 3, "a new key has a full bucket of burst=3")
		x.expect("k", 1, false, 100*time.Millisecond, "empty bucket at rate=10/s: the next token is 100ms away")
		e.advance(50 * time.Millisecond)
		x.expect("k", 1, false, 50*time.Millisecond, "after 50ms half a token dripped in; 50ms to go")
		e.advance(50 * time.Millisecond)
		x.expect("k", 1, true, 0, "after 100ms = 1/rate a whole token dripped in (the refused call in between must not have reset the refill)")
		x.expect("k", 1, false, 100*time.Millisecond, "that token is spent; the next is 1/rate away")
		e.advance(250 * time.Millisecond)
		x.drain("k", 2, "after 250ms, 2.5 tokens dripped in")
		x.expect("k", 1, false, 50*time.Millisecond, "0.5 tokens left after two takes: 50ms to the next")
	})

	// A rate of 0 is allowed (New panics only for a negative, infinite or
	// NaN one): nothing ever drips in, so a key never gives more than its
	// burst, and a refusal's wait is never finite. The takes go through
	// TryTake, which answers whether or not the script copes with a rate
	// of 0.
	burst := float64(1 + e.rng.IntN(6))
	if e.rng.IntN(2) == 0 {
		burst += math.Round(e.rng.Float64()*100) / 100
	}
	pause := time.Duration(1+e.rng.IntN(3600)) * time.Second
	if !e.fake() {
		pause = time.Duration(20+e.rng.IntN(80)) * time.Millisecond
	}
	e.attempts(func() {
		x := e.limiter(0, burst, nil)
		x.expect("zero", burst*(1+e.rng.Float64())+0.01, false, lab.InfDuration, fmt.Sprintf("rate=0, burst=%v: more than burst is never", burst))
		x.expect("zero", -e.rng.Float64(), true, 0, "n ≤ 0 always succeeds")
		var got float64
		takeAll := func(when string) {
			e.t.Helper()
			for range 3 + e.rng.IntN(8) {
				n := math.Round(burst*(0.1+0.5*e.rng.Float64())*100) / 100
				var ok bool
				var wait time.Duration
				e.begin()
				if r, stack := suitekit.Catch(func() { ok, wait = x.l.TryTake(e.key("zero"), n) }); r != nil {
					e.t.Fatal(suitekit.PanicReport(fmt.Sprintf("TryTake(%q, %v)", "zero", n), r, stack))
				}
				switch {
				case ok && wait != 0:
					e.t.Fatalf("%s: rate=0, burst=%v, %s: TryTake(%q, %v) = (true, %v); want wait 0 with every admission", e.at(), burst, when, "zero", n, fmtWait(wait))
				case ok:
					got += n
				case wait != lab.InfDuration:
					e.t.Fatalf("%s: rate=0, burst=%v, %s: TryTake(%q, %v) = (false, %v); want (false, lab.InfDuration): at a rate of 0 the tokens never come",
						e.at(), burst, when, "zero", n, fmtWait(wait))
				}
				if got > burst+1e-9 {
					e.t.Fatalf("%s: rate=0, burst=%v, %s: TryTake has admitted %v tokens of key %q; want at most burst=%v: at a rate of 0 nothing drips in",
						e.at(), burst, when, got, "zero", burst)
				}
			}
		}
		takeAll("a new key")
		e.advance(pause)
		takeAll(fmt.Sprintf("%v later", pause))
	})
}

func (s *suite) capsAtBurst(e *env) {
	// The bucket sits idle for longer than it takes to fill. That is also
	// longer than the shortest expiry allowed, and a key that expired comes
	// back full whatever the cap; so on miniredis the clock moves an hour
	// without ageing the key's TTL (as if the expiry had a long margin),
	// and on a real Redis the idle time is 250ms, well inside the margin of
	// about a second that the reference gives.
	idle, why := time.Hour, "Redis's clock moved an hour (the key was kept)"
	if !e.fake() {
		idle, why = 250*time.Millisecond, "after 250ms idle"
	}
	rest := func() {
		if e.fake() {
			e.jump(idle)
		} else {
			e.advance(idle)
		}
	}
	e.attempts(func() {
		x := e.limiter(40, 3, nil) // one token every 25ms
		x.drain("k", 3, "a new key has a full bucket of burst=3")
		rest()
		x.drain("k", 3, why+": the bucket is full again")
		x.expect("k", 1, false, 25*time.Millisecond,
			fmt.Sprintf("%s at 40/s would drip in %g tokens, but a bucket never holds more than burst=3: cap the refill", why, 40*idle.Seconds()))
		x.expect("j", 2, true, 0, "a new key has a full bucket of burst=3")
		rest()
		x.expect("j", 3, true, 0, "one token left plus the refill: the bucket is full again")
		x.expect("j", 1, false, 25*time.Millisecond, "after a refill from 1 token the bucket held burst=3, not 1 + the whole refill")
	})
}

// minRealWait is the shortest random wait ExactWait asks a real Redis to
// judge: longer than the round trips of a busy machine under the race
// detector, shorter than the shortest fixed case (49.975ms).
const minRealWait = 20 * time.Millisecond

func (s *suite) exactWait(e *env) {
	// Each case empties part of a new bucket, then asks for more than is
	// left. The waits have fractions of a millisecond, most of them close to
	// a whole one, so that a wait rounded down to the millisecond comes out
	// short even on a real Redis, where the calls themselves take time.
	cases := []struct {
		rate, burst, first, then float64
		wait                     time.Duration // exact, rounded up to the ns
		why                      string
	}{
		{6, 1, 1, 1, 166666667, "empty at rate 6/s: one token takes 166.666667ms"},
		{7, 5, 4.5, 2, 214285715, "0.5 tokens left, want 2, at 7/s: 1.5/7 s = 214.2857143ms"},
		{8, 1, 1, 0.9999, 124987500, "empty at 8/s, want 0.9999: 124.9875ms"},
		{40, 2, 2, 1.999, 49975000, "empty at 40/s, want 1.999: 49.975ms"},
	}
	// And as many drawn at random on every run: any rate, burst and
	// amounts, rounded to a thousandth so that the messages stay readable.
	for range 4 {
		rate := math.Round((2+e.rng.Float64()*48)*1000) / 1000
		burst := float64(1 + e.rng.IntN(8))
		if e.rng.IntN(2) == 0 {
			burst += math.Round(e.rng.Float64()*1000) / 1000
		}
		first := math.Max(0.001, math.Round(burst*(0.3+0.7*e.rng.Float64())*1000)/1000)
		left := burst - first
		then := math.Min(burst, math.Round((left+0.001+math.Min(first, rate/2)*e.rng.Float64())*1000)/1000) // a wait of at most half a second
		if then <= left {
			continue
		}
		if !e.fake() {
			// A real Redis's answers take a round trip or two, which the
			// race detector and a busy machine stretch to milliseconds: a
			// wait shorter than that is over before it can be judged, and
			// every try would be inconclusive (a draw of 522µs skipped
			// the check in CI). Waits that short are judged on miniredis,
			// whose clock stands still.
			then = math.Max(then, math.Ceil((left+minRealWait.Seconds()*rate)*1000)/1000)
			if then > burst {
				continue
			}
		}
		// Rounded down to the nanosecond: the exact wait lies within a
		// nanosecond above it, and a script may round up from there.
		exact := time.Duration(math.Floor((then - left) / rate * 1e9))
		cases = append(cases, struct {
			rate, burst, first, then float64
			wait                     time.Duration
			why                      string
		}{rate, burst, first, then, exact, fmt.Sprintf("%.4g tokens left, want %v, at %v/s: (%v − %.4g)/%v s = %v", left, then, rate, then, left, rate, exact)})
	}
	for i, c := range cases {
		e.attempts(func() {
			x := e.limiter(c.rate, c.burst, nil)
			name := fmt.Sprintf("case%d", i)
			x.expect(name, c.first, true, 0, fmt.Sprintf("a new key has a full bucket of burst=%v", c.burst))
			x.expect(name, c.then, false, c.wait, c.why)
			retryAfter(x, name, c.then)
		})
	}

	// A refusal spends nothing.
	e.attempts(func() {
		x := e.limiter(1, 3, nil)
		x.expect("keep", 2, true, 0, "a new key holds 3 tokens")
		x.expect("keep", 2, false, time.Second, "1 token left, want 2: wait = 1/1 s")
		x.expect("keep", 1, true, 0, "the refused TryTake(2) must not have spent the 1 token left")
	})

	// Partial tokens after a sleep.
	e.attempts(func() {
		x := e.limiter(10, 2, nil)
		x.drain("part", 2, "a new key has a full bucket of burst=2")
		e.advance(30 * time.Millisecond)
		x.expect("part", 1, false, 70*time.Millisecond, "0.3 tokens, want 1: wait = (1 − 0.3)/10 s")
		x.expect("part", 2, false, 170*time.Millisecond, "0.3 tokens, want 2: wait = (2 − 0.3)/10 s")
		x.expect("part", 0.5, false, 20*time.Millisecond, "0.3 tokens, want 0.5: wait = (0.5 − 0.3)/10 s")
	})

	if !e.fake() {
		return
	}
	// Below the millisecond, with the clock stopped: only miniredis can.
	// One token at a rate whose period is no whole number of microseconds.
	r := []float64{3, 6, 7, 9, 11, 12, 13, 14, 15, 17, 19}[e.rng.IntN(11)]
	period := time.Duration(math.Floor(1e9 / r)) // rounded down to the ns
	x := e.limiter(r, 1, nil)
	x.drain("fine", 1, "a new key has a full bucket of burst=1")
	x.expect("fine", 1, false, period, fmt.Sprintf("empty at %v/s: one token takes %v", r, period))
	below := period.Truncate(time.Microsecond)
	e.advance(below)
	x.expect("fine", 1, false, period-below, fmt.Sprintf("after %v, %v to go, so the wait must not be 0 (a refusal with wait 0 sends the caller straight back)", below, period-below))
	e.advance(time.Microsecond)
	x.expect("fine", 1, true, 0, fmt.Sprintf("after %v the token is there", below+time.Microsecond))

	// A slow rate.
	x = e.limiter(0.5, 1, nil)
	x.drain("slow", 1, "a new key has a full bucket of burst=1")
	x.expect("slow", 1, false, 2*time.Second, "rate 0.5/s: one token takes 2s")
	retryAfter(x, "slow", 1)
}

// retryAfter asks for n, lets exactly the wait it is given pass and asks
// again, which must succeed.
func retryAfter(x *lim, name string, n float64) {
	x.e.t.Helper()
	ok, wait := x.take(name, n)
	if ok {
		if x.e.slack() > 0 {
			panic(inconclusive{fmt.Sprintf("TryTake(%q, %v) was due to be refused, but it got in after %v of slack", name, n, x.e.slack())})
		}
		x.e.t.Fatalf("%s: TryTake(%q, %v) = (true, %v); want a refusal (the check expects the bucket to be short)", x.e.at(), name, n, wait)
	}
	if wait <= 0 || wait > time.Hour {
		x.e.t.Fatalf("%s: TryTake(%q, %v) = (false, %v); want a wait between 0 and an hour", x.e.at(), name, n, wait)
	}
	x.e.advance(wait)
	if ok, again := x.take(name, n); !ok {
		x.e.t.Fatalf("%s: TryTake(%q, %v) = (false, %v); want (true, 0s)\n"+
			"a caller that waits exactly the wait it was given (%v) must then get in: round the wait up, never down, and let a refusal change nothing",
			x.e.at(), name, n, again, wait)
	}
}

func (s *suite) fractionalTokens(e *env) {
	e.attempts(func() {
		x := e.limiter(4, 1, nil)
		x.expect("half", 0.5, true, 0, "a full bucket of 1 token has room for two halves")
		x.expect("half", 0.5, true, 0, "a full bucket of 1 token has room for two halves")
		x.expect("half", 0.5, false, 125*time.Millisecond, "empty at rate=4/s: half a token takes 125ms")
		e.advance(125 * time.Millisecond)
		x.expect("half", 0.5, true, 0, "after 125ms half a token is there")
		x.expect("half", 0.25, false, 62500*time.Microsecond, "empty again: a quarter token takes 62.5ms")
	})
	e.attempts(func() {
		x := e.limiter(1, 2.5, nil)
		x.expect("frac", 2.5, true, 0, "a new key holds burst=2.5 tokens, fractions included")
		x.expect("frac", 0.25, false, 250*time.Millisecond, "empty at 1/s: a quarter token takes 250ms")
		e.advance(750 * time.Millisecond)
		x.expect("frac", 0.5, true, 0, "0.75 tokens after 750ms")
		x.expect("frac", 0.5, false, 250*time.Millisecond, "0.25 tokens left, want 0.5: wait = 0.25/1 s")
	})
}

func (s *suite) moreThanBurst(e *env) {
	e.attempts(func() {
		x := e.limiter(10, 2, nil)
		x.expect("k", 2.5, false, lab.InfDuration, "n greater than burst=2 can never succeed: (false, lab.InfDuration)")
		x.expect("k", 3, false, lab.InfDuration, "n greater than burst=2 can never succeed: (false, lab.InfDuration)")
		x.expect("k", 1e9, false, lab.InfDuration, "n greater than burst=2 can never succeed: (false, lab.InfDuration)")
		x.expect("k", math.NaN(), false, lab.InfDuration, "NaN tokens can never be had")
		x.expect("k", 2, true, 0, "n = burst succeeds on a full bucket, and the impossible requests spent nothing")
		x.expect("k", 2.5, false, lab.InfDuration, "on an empty bucket too, n > burst is never, not a finite wait")
		x.expect("k", 2, false, 200*time.Millisecond, "n = burst on an empty bucket waits burst/rate = 200ms")
	})
	// The same with a random bucket and random amounts above its burst.
	rate := 5 + math.Round(e.rng.Float64()*4500)/100
	burst := 0.5 + math.Round(e.rng.Float64()*2000)/100
	over := []float64{
		burst + 1e-6*burst,
		math.Nextafter(burst, math.Inf(1)) + burst*e.rng.Float64(),
		burst * float64(2+e.rng.IntN(1000)),
		math.Inf(1),
	}
	e.attempts(func() {
		x := e.limiter(rate, burst, nil)
		for _, n := range over {
			x.expect("r", n, false, lab.InfDuration, fmt.Sprintf("n=%v is greater than burst=%v: never", n, burst))
		}
		x.expect("r", burst, true, 0, fmt.Sprintf("n = burst=%v succeeds on a full bucket, and the impossible requests spent nothing", burst))
		for _, n := range over {
			x.expect("r", n, false, lab.InfDuration, "on an empty bucket too, n > burst is never, not a finite wait")
		}
	})
	// A burst of 0 is allowed (New panics only for a negative, infinite
	// or NaN one): every n > 0 is more than it, at any time; n ≤ 0 still
	// succeeds.
	zero := []float64{
		1e-9,
		math.Round(e.rng.Float64()*1000)/1000 + 0.001,
		float64(1 + e.rng.IntN(100)),
		rate,
	}
	e.attempts(func() {
		x := e.limiter(rate, 0, nil)
		for _, n := range zero {
			x.expect("none", n, false, lab.InfDuration, fmt.Sprintf("n=%v is greater than burst=0: never", n))
		}
		x.expect("none", 0, true, 0, "n = 0 always succeeds, even with burst=0")
		x.expect("none", -e.rng.Float64()*10, true, 0, "n < 0 always succeeds, even with burst=0")
		e.advance(time.Duration(10+e.rng.IntN(90)) * time.Millisecond)
		for _, n := range zero {
			x.expect("none", n, false, lab.InfDuration, fmt.Sprintf("later too, n=%v is greater than burst=0: never", n))
		}
	})
}

// The expiry a key may have: at least what the bucket needs to refill to
// full (a key that disappears earlier comes back as a full bucket, letting
// a client in early), at most the time from empty to full plus a margin.
const expiryMargin = time.Second

func (s *suite) expiry(e *env) {
	// A random bucket that refills from empty in 1.5s to 8s; the first take
	// leaves part of it, the second, later, takes most of the rest, so the
	// expiry must follow the tokens missing, not the tokens taken.
	rate := 1 + math.Round(e.rng.Float64()*300)/100 // 1 to 4 tokens a second
	burst := math.Round((1.5+e.rng.Float64()*6.5)*rate*100) / 100
	first := math.Round(burst*(0.1+0.3*e.rng.Float64())*100) / 100
	pause := time.Duration(200+e.rng.IntN(300)) * time.Millisecond
	second := math.Round((burst-first)*(0.6+0.3*e.rng.Float64())*100) / 100
	most := time.Duration(burst/rate*float64(time.Second)) + expiryMargin + time.Millisecond
	e.attempts(func() {
		x := e.limiter(rate, burst, nil)
		x.expect("k", first, true, 0, fmt.Sprintf("a new key has a full bucket of burst=%v", burst))
		p0 := s.checkTTL(e, "k", rate, burst, burst-first, most, "after the first take")
		e.advance(pause)
		left := math.Min(burst, burst-first+rate*pause.Seconds())
		x.expect("k", second, true, 0, fmt.Sprintf("%v + %v tokens are there", burst-first, left-(burst-first)))
		p1 := s.checkTTL(e, "k", rate, burst, left-second, most, fmt.Sprintf("after a second take %v later", pause))
		if p1 < p0-pause/2 {
			e.t.Fatalf("%s: the key's PTTL went from %v to %v across a take %v later; want it set again by every take\n"+
				"a key in use must not expire: PEXPIRE on every take, not only when the key is created",
				e.at(), p0, p1, pause)
		}
		if !e.fake() {
			return
		}
		// Idle for longer than any allowed expiry: the key must be gone,
		// and the bucket full again.
		e.advance(most)
		if key := e.redisKey("k"); key != "" {
			e.t.Fatalf("%s: key %q still exists after %v idle; want it expired\n"+
				"an idle key must disappear once its bucket is full again, or Redis keeps every key ever seen: set an expiry of the refill time plus at most %v",
				e.at(), key, most, expiryMargin)
		}
		x.expect("k", burst, true, 0, "an expired key is a full bucket again")
	})
}

// checkTTL checks the expiry of the key of name, whose bucket (rate, burst)
// holds tokens (planned) after a take, and returns it.
func (s *suite) checkTTL(e *env, name string, rate, burst, tokens float64, most time.Duration, when string) time.Duration {
	e.t.Helper()
	key := e.redisKey(name)
	if key == "" {
		e.t.Fatalf("%s: no Redis key ends with %q %s; want the bucket's hash", e.at(), e.key(name), when)
	}
	pttl, err := e.rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		e.t.Fatalf("PTTL %s: %v", key, err)
	}
	least := time.Duration((burst-tokens)/rate*float64(time.Second)) - e.slack() - time.Millisecond
	switch {
	case pttl < 0:
		e.t.Fatalf("%s: PTTL %s = %v %s; want an expiry between %v and %v\n"+
			"the key has no expiry, so Redis keeps a hash for every key ever seen: PEXPIRE it on every take",
			e.at(), key, pttl, when, least, most)
	case pttl < least:
		e.t.Fatalf("%s: PTTL %s = %v %s; want at least %v, the time its %.4g tokens take to refill to burst=%v at %v/s\n"+
			"a key that expires before its bucket is full again comes back full, letting the client in early",
			e.at(), key, pttl, when, least, tokens, burst, rate)
	case pttl > most:
		e.t.Fatalf("%s: PTTL %s = %v %s; want at most %v: empty to full (burst/rate = %v) plus a margin of at most %v",
			e.at(), key, pttl, when, most, time.Duration(burst/rate*float64(time.Second)), expiryMargin)
	}
	return pttl
}

func (s *suite) redisClock(e *env) {
	ctx := context.Background()
	sc := redis.NewScript(s.script)
	// The script, called directly: rate, burst and n are all it gets, and
	// an extra argument that looks like a time must change nothing.
	e.attempts(func() {
		key := e.key("direct")
		e.begin()
		reply, err := sc.Run(ctx, e.rdb, []string{key}, "1", "2", "2").Slice()
		if err != nil {
			if strings.Contains(err.Error(), lab.ErrNotImplemented.Error()) {
				e.t.Fatal((&lab.TODO{Task: 6, What: "tokenbucket.lua"}).Error())
			}
			e.t.Fatalf("EVAL tokenbucket.lua with KEYS={%q} ARGV={1, 2, 2} failed: %v\n"+
				"the script must work with rate, burst and n alone: the time comes from redis.call('TIME'), never from the caller", key, err)
		}
		if len(reply) != 2 || reply[0] != int64(1) {
			e.t.Fatalf("EVAL tokenbucket.lua with ARGV={1, 2, 2} on a new key = %#v; want {1, 0}: a new bucket holds burst=2", reply)
		}
		now := time.Now()
		if e.fake() {
			now = e.clock
		}
		future := now.Add(time.Hour + time.Duration(e.rng.Int64N(int64(365*24*time.Hour)))) // an hour to a year ahead
		for _, when := range []string{
			strconv.FormatInt(future.Unix(), 10),
			strconv.FormatFloat(float64(future.UnixMicro())/1e6, 'f', 6, 64),
			strconv.FormatInt(future.UnixMilli(), 10),
			strconv.FormatInt(future.UnixMicro(), 10),
		} {
			reply, err := sc.Run(ctx, e.rdb, []string{key}, "1", "2", "1", when).Slice()
			if err != nil {
				e.t.Fatalf("EVAL tokenbucket.lua with ARGV={1, 2, 1, %s} failed: %v", when, err)
			}
			if len(reply) != 2 || reply[0] == int64(1) {
				if e.slack() >= 900*time.Millisecond {
					panic(inconclusive{fmt.Sprintf("almost a second passed between two EVALs (%v)", e.slack())})
				}
				e.t.Fatalf("%s: EVAL tokenbucket.lua with ARGV={1, 2, 1, %s} (a client's clock %v ahead) on an empty bucket = %#v; want a refusal {0, about 1000}\n"+
					"the script must read the time with redis.call('TIME') and ignore any time a client sends: clients' clocks disagree",
					e.at(), when, future.Sub(now).Round(time.Second), reply)
			}
		}
	})

	// The limiter sends no time either: every script call it makes carries
	// one key and three arguments.
	var calls recorder
	rdb := e.client()
	rdb.AddHook(&calls)
	x := e.limiterOn(rdb, 2, 2, nil)
	y := e.limiter(2, 2, nil) // another process, another client
	e.attempts(func() {
		x.expect("shared", 1, true, 0, "a new key holds burst=2")
		y.expect("shared", 1, true, 0, "the second limiter shares the bucket: 1 token left")
		x.expect("shared", 1, false, 500*time.Millisecond, "both limiters took one: the shared bucket is empty, 500ms to the next token")
		y.expect("shared", 1, false, 500*time.Millisecond, "both limiters see the same bucket and the same clock")
	})
	if bad := calls.bad(); bad != "" {
		e.t.Fatalf("the limiter called the script with %s; want exactly 1 key and 3 arguments (rate, burst, n)\n"+
			"pass no time from Go: the script reads Redis's clock with redis.call('TIME'), so all processes agree", bad)
	}

	if !e.fake() {
		return
	}
	// Redis's clock moves while the client's stays put (miniredis's clock
	// is set by hand): the bucket follows Redis's.
	z := e.limiter(1, 2, nil)
	z.drain("server-time", 2, "a new key holds burst=2")
	e.advance(1500 * time.Millisecond)
	z.expect("server-time", 1, true, 0, "Redis's clock moved 1.5s (the client's clock barely moved): 1.5 tokens dripped in by Redis's clock")
	z.expect("server-time", 1, false, 500*time.Millisecond, "0.5 tokens left by Redis's clock")
	// And Redis's clock may step back, then catch up.
	clockStepsBack(e)
}

// recorder is a go-redis hook that notes script calls with other than one
// key and three arguments.
type recorder struct {
	mu    sync.Mutex
	wrong []string
}

func (r *recorder) bad() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.wrong) == 0 {
		return ""
	}
	return strings.Join(r.wrong, "; ")
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			r.note(c)
		}
		return next(ctx, cmds)
	}
}

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.note(cmd)
		return next(ctx, cmd)
	}
}

func (r *recorder) note(cmd redis.Cmder) {
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
	default:
		return
	}
	args := cmd.Args()
	keys := -1
	if len(args) >= 3 {
		keys, _ = strconv.Atoi(fmt.Sprint(args[2]))
	}
	if keys == 1 && len(args) == 3+1+3 {
		return
	}
	shown := make([]string, 0, len(args))
	for i, a := range args {
		if i == 1 {
			a = "<script>"
		}
		shown = append(shown, fmt.Sprint(a))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.wrong) < 3 {
		r.wrong = append(r.wrong, strings.Join(shown, " "))
	}
}

func (s *suite) atomicity(e *env) {
	// Two limiters, as two processes would have, each with its own pool of
	// connections, hammer one to three keys from 16 goroutines each, with
	// a random rate, burst and take. Tokens are spent twice only while two
	// callers overlap as a bucket drains, and a bucket that never drains
	// shows nothing, however often it was overspent. So a key is replaced
	// by a new one (a round) as soon as it has been asked for twice its
	// burst, and a run drains one bucket after another: the first round,
	// where the first goroutine to run can drain a small burst alone while
	// the others dial their connections, and then rounds with every
	// goroutine busy, each giving a read in one command and a write in
	// another its chance.
	const (
		perLimiter = 16
		duration   = 300 * time.Millisecond
		maxRounds  = 64 // per key; the last one takes every call after it
	)
	rate := float64(5 + e.rng.IntN(46))
	burst := float64(5 + e.rng.IntN(36))
	n := []float64{1, 1, 0.5, 2, 0.25}[e.rng.IntN(5)]
	hot := 1 + e.rng.IntN(3)
	var limiters [2]*lim
	for i := range limiters {
		limiters[i] = e.limiterOn(e.clientAt(e.options().Addr, perLimiter), rate, burst, nil)
		// A first call on another key opens a connection, so that a stub
		// or a broken script fails here with its own message.
		limiters[i].take("warm-up", 1)
	}
	// One bucket per round and hot key, each with its own counts and the
	// span its calls covered (nanoseconds since start: the first call's
	// start, the last call's end), over which Redis's clock may refill it.
	type bucket struct {
		key         string
		admitted    atomic.Int64
		asked       atomic.Int64 // calls Redis answered
		first, last atomic.Int64
	}
	buckets := make([]bucket, maxRounds*hot)
	for i := range buckets {
		buckets[i].key = e.key(fmt.Sprintf("hot%d-round%d", i%hot, i/hot))
		buckets[i].first.Store(math.MaxInt64)
	}
	current := make([]atomic.Int64, hot) // each key's round
	var (
		calls    atomic.Int64
		slow     atomic.Int64 // calls Redis did not answer in time
		firstErr atomic.Value // string
		wg       sync.WaitGroup
		begin    = make(chan struct{})
	)
	start := time.Now()
	for g := range 2 * perLimiter {
		x := limiters[g%2]
		k := (g / 2) % hot
		wg.Go(func() {
			<-begin
			for {
				t0 := time.Since(start)
				if t0 >= duration {
					return
				}
				r := current[k].Load()
				b := &buckets[int(r)*hot+k]
				var ok bool
				var wait time.Duration
				var err error
				if rec, stack := suitekit.Catch(func() { ok, wait, err = x.l.TryTakeCtx(context.Background(), b.key, n) }); rec != nil {
					firstErr.CompareAndSwap(nil, suitekit.PanicReport(fmt.Sprintf("TryTakeCtx in goroutine %d", g), rec, stack))
					return
				}
				t1 := time.Since(start)
				lowerTo(&b.first, int64(t0))
				raiseTo(&b.last, int64(t1))
				if err != nil {
					// On a loaded machine a call may time out; the limiter
					// then answers locally for a while. Those answers do
					// not count: the check is about Redis's decisions.
					if timedOut(err) {
						slow.Add(1)
						continue
					}
					firstErr.CompareAndSwap(nil, errReport(fmt.Sprintf("TryTakeCtx in goroutine %d", g), err))
					return
				}
				calls.Add(1)
				if float64(b.asked.Add(1))*n >= 2*burst && r+1 < maxRounds {
					current[k].CompareAndSwap(r, r+1) // drained: a new bucket
				}
				if ok && wait != 0 {
					firstErr.CompareAndSwap(nil, fmt.Sprintf("TryTakeCtx(%q, %v) in goroutine %d = (true, %v, nil); want wait 0 with every admission", b.key, n, g, fmtWait(wait)))
					return
				}
				if ok {
					b.admitted.Add(1)
				}
			}
		})
	}
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	if msg := firstErr.Load(); msg != nil {
		e.t.Fatal(msg)
	}
	for i := range buckets {
		b := &buckets[i]
		if b.asked.Load() == 0 {
			continue
		}
		span := time.Duration(b.last.Load() - b.first.Load())
		most := burst // miniredis's clock stands still
		if !e.fake() {
			most += rate * span.Seconds()
		}
		got := float64(b.admitted.Load()) * n
		if got > most+1e-9 {
			e.t.Fatalf("%d goroutines on 2 clients made %d calls of n=%v on %d keys at a time, each replaced by a new one once asked for twice its burst, for %v; key %q (round %d) got %v tokens in %v; want at most burst + rate × that time = %v + %v × %v = %.2f\n"+
				"the read, the refill, the decision and the write must happen in one step on the server: all of them inside the Lua script, "+
				"never a read in one command and a write in another",
				2*perLimiter, calls.Load(), n, hot, elapsed.Round(time.Millisecond), b.key, i/hot, got, span.Round(time.Microsecond), burst, rate, span.Round(time.Microsecond), most)
		}
		// Until a new bucket runs dry, every call gets in. (A call that
		// timed out may have spent a token unseen.)
		least := math.Min(burst, float64(b.asked.Load())*n) - n
		if got < least-1e-9 && slow.Load() == 0 {
			e.t.Fatalf("%d goroutines made %d calls of n=%v on %d keys at a time of new buckets; key %q (round %d) was asked %d times and gave only %v tokens; want at least %v (burst=%v)",
				2*perLimiter, calls.Load(), n, hot, b.key, i/hot, b.asked.Load(), got, least+n, burst)
		}
	}
}

// lowerTo stores v in x if it is below x's value.
func lowerTo(x *atomic.Int64, v int64) {
	for old := x.Load(); v < old; old = x.Load() {
		if x.CompareAndSwap(old, v) {
			return
		}
	}
}

// raiseTo stores v in x if it is above x's value.
func raiseTo(x *atomic.Int64, v int64) {
	for old := x.Load(); v > old; old = x.Load() {
		if x.CompareAndSwap(old, v) {
			return
		}
	}
}

// timedOut reports whether err says Redis did not answer in time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// options returns the client options of the server's URL.
func (e *env) options() *redis.Options {
	e.t.Helper()
	opt, err := redis.ParseURL(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	return opt
}

// clientAt opens a client of the server at addr (the server's own address, or
// a proxy's) with redisenv's timeouts and, if pool is not 0, room for pool
// connections opened ahead of use.
func (e *env) clientAt(addr string, pool int) *redis.Client {
	e.t.Helper()
	opt := e.options()
	opt.Addr = addr
	redisenv.Tune(opt)
	if pool > 0 {
		opt.PoolSize, opt.MinIdleConns = pool, pool
	}
	rdb := redis.NewClient(opt)
	e.t.Cleanup(func() { rdb.Close() })
	return rdb
}

func (s *suite) failOpen(e *env) {
	const (
		rate, burst = 2, 4
		phase       = 300 * time.Millisecond
		slowest     = time.Second // far above the 200ms timeouts, for slow CI
		comeBack    = 4 * time.Second
		// While Redis hangs, a call that tries it waits out the client's
		// timeout; the contract allows one such call per back-off
		// (DefaultBackoff, 500ms). Over hangFor that is about 3 (a call
		// that times out, then 500ms of local answers); with no back-off
		// every call times out, about 10.
		hangFor    = 2 * time.Second
		slowCall   = 100 * time.Millisecond
		backoff    = 500 * time.Millisecond
		mostSlowed = int(hangFor/backoff) + 2
	)
	p := startProxy(e.t, e.options().Addr)
	logs := &logRecorder{}
	x := e.limiterOn(e.clientAt(p.addr(), 0), rate, burst, slog.New(logs))

	// Redis works: it decides.
	x.drain("k", 4, "a new key holds burst=4 (Redis is up)")
	if n := x.failOpen(); n != 0 {
		e.t.Fatalf("FailOpen() = %d while Redis answered every call; want 0", n)
	}
	if n := logs.count(); n != 0 {
		e.t.Fatalf("the limiter logged %d times while Redis answered every call; want 0: %s", n, logs.all())
	}

	// Redis goes away, first refusing connections, then accepting them and
	// never answering. Every call must still be answered, quickly, from the
	// local bucket (which starts full: it never saw the takes above).
	outage := time.Now()
	var calls, admitted int64
	for _, mode := range []proxyMode{refuse, hang} {
		p.set(mode)
		length, slowed := phase, 0
		if mode == hang {
			length = hangFor
		}
		for end := time.Now().Add(length); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			began := time.Now()
			ok, wait, err := x.try(context.Background(), "k", 1)
			took := time.Since(began)
			calls++
			if took >= slowCall {
				slowed++
			}
			if took > slowest {
				e.t.Fatalf("with Redis %s, TryTakeCtx took %v; want under %v: give up on Redis quickly (short timeouts) and do not try it on every call while it fails",
					mode, took.Round(time.Millisecond), slowest)
			}
			if err == nil {
				e.t.Fatalf("with Redis %s, TryTakeCtx = (%v, %v, nil); want an error saying the answer is local", mode, ok, wait)
			}
			if ok && wait != 0 {
				e.t.Fatalf("with Redis %s, TryTakeCtx = (true, %v, %v); want wait 0 with every admission, local ones too", mode, fmtWait(wait), err)
			}
			if ok {
				admitted++
			} else if wait <= 0 {
				e.t.Fatalf("with Redis %s, TryTakeCtx = (false, %v, %v); want a positive wait from the local bucket", mode, wait, err)
			}
		}
		if mode == hang && slowed > mostSlowed {
			e.t.Fatalf("with Redis hanging for %v, %d calls waited %v or more for it; want at most %d: after a failure, answer locally for the back-off (%v) before trying Redis again, one timeout per back-off, not one per call",
				hangFor, slowed, slowCall, mostSlowed, backoff)
		}
		if got := x.failOpen(); got != calls {
			e.t.Fatalf("with Redis %s, FailOpen() = %d after %d calls answered locally; want %d: count every decision made without Redis", mode, got, calls, calls)
		}
	}
	most := burst + rate*time.Since(outage).Seconds()
	switch {
	case admitted == 0:
		e.t.Fatalf("with Redis unreachable, 0 of %d calls were admitted; want the local bucket's burst at least: fail open, not closed", calls)
	case float64(admitted) > most:
		e.t.Fatalf("with Redis unreachable, %d of %d calls were admitted in %v; want at most burst + rate × elapsed = %.1f from the local bucket",
			admitted, calls, time.Since(outage).Round(time.Millisecond), most)
	}
	if n := logs.count(); n != 1 {
		e.t.Fatalf("the limiter logged %d times during an outage of %d calls; want exactly once: %s", n, calls, logs.all())
	}

	// Redis comes back: the limiter must return to it.
	p.set(forward)
	back := time.Now()
	for {
		ok, wait, err := x.try(context.Background(), "probe", 0.001)
		if err == nil {
			if !ok || wait != 0 {
				e.t.Fatalf(`TryTakeCtx("probe", 0.001) = (%v, %v, nil) on a new key; want (true, 0s, nil)`, ok, wait)
			}
			break
		}
		if time.Since(back) > comeBack {
			e.t.Fatalf("Redis answered again %v ago, but the limiter still answers locally: %v\ntry Redis again after a short back-off", comeBack, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.redisKey("probe") == "" {
		e.t.Fatal("TryTakeCtx returned no error, but no key for the bucket exists in Redis")
	}
	before := x.failOpen()
	x.expect("after", 1, true, 0, "a new key holds burst=4, and Redis decides again")
	if after := x.failOpen(); after != before {
		e.t.Fatalf("FailOpen() went from %d to %d on a call Redis answered; want unchanged", before, after)
	}
	if n := logs.count(); n > 2 {
		e.t.Fatalf("the limiter logged %d times over one outage; want once when Redis fails and at most once when it is back: %s", n, logs.all())
	}

	s.failOpenScripted(e)
}

// errScripted is what a scriptHook makes the limiter's script calls fail
// with: the failure the limiter must report.
var errScripted = errors.New("redisbucketsuite: the script call failed (a failure the check makes up)")

// The modes of a scriptHook.
const (
	hookPass int32 = iota // the script runs
	hookFail              // the call fails at once with errScripted
	hookHang              // the call waits until its context ends
)

// scriptHook is a go-redis hook that counts the limiter's script calls
// (EVAL, EVALSHA and their _RO forms) and can make them fail or hang
// without touching the server.
type scriptHook struct {
	mode  atomic.Int32
	calls atomic.Int64
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if isScriptCall(c) {
				h.calls.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScriptCall(cmd) {
			return next(ctx, cmd)
		}
		h.calls.Add(1)
		switch h.mode.Load() {
		case hookFail:
			return fmt.Errorf("%w", errScripted)
		case hookHang:
			// Until the limiter's own timeout ends the call; the cap only
			// keeps a limiter without one from hanging the check.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
				return fmt.Errorf("redisbucketsuite: no answer in 2s: %w", context.DeadlineExceeded)
			}
		}
		return next(ctx, cmd)
	}
}

// isScriptCall reports whether cmd runs a script.
func isScriptCall(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		return true
	}
	return false
}

// failOpenScripted is the second half of FailOpen: Redis fails in ways a
// hook on the limiter's client makes up, with a random bucket.
//
//   - The error of a local decision wraps the failure that made it local,
//     also during the back-off that follows, when Redis is not tried.
//   - When the back-off ends, of many concurrent callers exactly one tries
//     Redis; the others answer locally meanwhile.
//   - A local answer that admits has wait 0, as every admission has.
func (s *suite) failOpenScripted(e *env) {
	const (
		backoff  = 500 * time.Millisecond // DefaultBackoff
		timeout  = 200 * time.Millisecond // DefaultTimeout
		slowest  = time.Second
		comeBack = 4 * time.Second
	)
	ctx := context.Background()
	rate := 1 + math.Round(e.rng.Float64()*1900)/100
	burst := float64(2 + e.rng.IntN(9))
	var h scriptHook
	rdb := e.client()
	rdb.AddHook(&h)
	x := e.limiterOn(rdb, rate, burst, nil)
	e.fresh()
	// Redis decides, and the script is cached.
	x.take("warm", 1)

	// local judges one answer that did not come from Redis.
	local := func(what string, ok bool, wait time.Duration, err error) {
		e.t.Helper()
		switch {
		case err == nil:
			e.t.Fatalf("%s: TryTakeCtx = (%v, %v, nil); want an error saying the answer is local", what, ok, fmtWait(wait))
		case ok && wait != 0:
			e.t.Fatalf("%s: TryTakeCtx = (true, %v, %v); want wait 0 with every admission, local ones too", what, fmtWait(wait), err)
		case !ok && wait <= 0:
			e.t.Fatalf("%s: TryTakeCtx = (false, %v, %v); want a positive wait from the local bucket", what, fmtWait(wait), err)
		}
	}
	n := func() float64 { return math.Round(burst*(0.05+0.3*e.rng.Float64())*100) / 100 }

	// Redis fails: the call that met the failure, then every call of the
	// back-off, report it.
	h.mode.Store(hookFail)
	failedAt := time.Now()
	before := h.calls.Load()
	ok, wait, err := x.try(ctx, "k", n())
	local("with the script call failing", ok, wait, err)
	if !errors.Is(err, errScripted) {
		e.t.Fatalf("with the script call failing with %q, TryTakeCtx returned the error %q; want one that wraps that failure (errors.Is): say what went wrong", errScripted, err)
	}
	if got := h.calls.Load() - before; got != 1 {
		e.t.Fatalf("one TryTakeCtx after Redis had worked made %d script calls; want 1", got)
	}
	for i := range 2 + e.rng.IntN(6) {
		before := h.calls.Load()
		ok, wait, err := x.try(ctx, "k", n())
		if time.Since(failedAt) >= backoff {
			break // too slow a machine to be sure the back-off is still on
		}
		what := fmt.Sprintf("call %d of the back-off after the script call failed", i+1)
		local(what, ok, wait, err)
		if !errors.Is(err, errScripted) {
			e.t.Fatalf("%s: TryTakeCtx returned the error %q; want one that wraps the failure that started the back-off, %q (errors.Is), as well as saying the answer is local",
				what, err, errScripted)
		}
		if got := h.calls.Load() - before; got != 0 {
			e.t.Fatalf("%s: TryTakeCtx made %d script calls; want none: do not try Redis during the back-off (%v)", what, got, backoff)
		}
	}

	// Redis hangs. Once the back-off is over, callers arrive together:
	// exactly one of them tries Redis (and waits out the timeout), the
	// others answer locally at once. A second try is right only once
	// that one failed and a whole back-off more has passed, so a batch
	// that took that long cannot be judged and runs again.
	h.mode.Store(hookHang)
	last := time.Now()
	judged := false
	for try := 0; try < 3 && !judged; try++ {
		time.Sleep(time.Until(last.Add(backoff + 50*time.Millisecond)))
		callers := 8 + e.rng.IntN(17)
		delays := make([]time.Duration, callers)
		amounts := make([]float64, callers)
		for i := range delays {
			delays[i] = time.Duration(e.rng.Int64N(int64(timeout / 4)))
			amounts[i] = n()
		}
		type answer struct {
			ok   bool
			wait time.Duration
			err  error
			took time.Duration
		}
		answers := make([]answer, callers)
		before := h.calls.Load()
		start := time.Now()
		// Hammer releases the goroutines together.
		suitekit.Hammer(e.t, callers, "TryTakeCtx", func(g int) {
			time.Sleep(delays[g])
			began := time.Now()
			a := &answers[g]
			a.ok, a.wait, a.err = x.l.TryTakeCtx(ctx, e.key("k"), amounts[g])
			a.took = time.Since(began)
		})
		last = time.Now()
		tries := h.calls.Load() - before
		for g, a := range answers {
			local(fmt.Sprintf("with Redis hanging, caller %d of %d arriving together after the back-off", g+1, callers), a.ok, a.wait, a.err)
			if a.took > slowest {
				e.t.Fatalf("with Redis hanging, caller %d of %d took %v; want under %v", g+1, callers, a.took.Round(time.Millisecond), slowest)
			}
		}
		if last.Sub(start) >= backoff+timeout {
			continue // too slow to tell a second try that is right from one that is not
		}
		judged = true
		if tries != 1 {
			e.t.Fatalf("with Redis hanging, %d callers arrived within %v after the back-off ended and made %d script calls; want exactly 1: "+
				"when the back-off ends, one call tries Redis while the others keep answering locally, so a stuck Redis costs one timeout per back-off",
				callers, timeout/4, tries)
		}
	}
	if !judged {
		e.t.Logf("this machine was too slow to judge how many callers try Redis after the back-off")
	}

	// Redis works again: the limiter goes back to it.
	h.mode.Store(hookPass)
	back := time.Now()
	for {
		ok, wait, err := x.try(ctx, "again", 1)
		if err == nil {
			if !ok || wait != 0 {
				e.t.Fatalf(`TryTakeCtx("again", 1) = (%v, %v, nil) on a new key; want (true, 0s, nil)`, ok, fmtWait(wait))
			}
			break
		}
		if time.Since(back) > comeBack {
			e.t.Fatalf("the script calls work again since %v, but the limiter still answers locally: %v", comeBack, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logRecorder is a slog.Handler that keeps the messages.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (h *logRecorder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.msgs)
}

func (h *logRecorder) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("%q", h.msgs)
}

// --- A TCP proxy that can play dead ---

// proxyMode is what a proxy does with connections.
type proxyMode int

const (
	forward proxyMode = iota // pass bytes both ways
	refuse                   // close every connection at once
	hang                     // accept connections and never answer
)

func (m proxyMode) String() string {
	return [...]string{"forwarding", "refusing connections", "accepting connections and never answering"}[m]
}

// proxy stands between a limiter and its Redis, so a check can take Redis
// away and bring it back without touching the server, which may be shared.
type proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	mode  proxyMode
	conns map[net.Conn]struct{} // open connections on both sides
}

func startProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		p.closeAll()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// set changes the mode and drops every open connection, so clients meet the
// new mode at once.
func (p *proxy) set(m proxyMode) {
	p.mu.Lock()
	p.mode = m
	p.mu.Unlock()
	p.closeAll()
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) track(c net.Conn) {
	p.conns[c] = struct{}{}
}

func (p *proxy) serve(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case refuse:
		c.Close()
	case hang:
		p.track(c) // closed by the next set or at cleanup
	case forward:
		up, err := net.DialTimeout("tcp", p.upstream, time.Second)
		if err != nil {
			c.Close()
			return
		}
		p.track(c)
		p.track(up)
		go pipe(up, c)
		go pipe(c, up)
	}
}

// pipe copies from src to dst until either fails, then closes both.
func pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}
