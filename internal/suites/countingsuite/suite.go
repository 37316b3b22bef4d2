// Package countingsuite is the one test suite of task 8 (four ways of
// counting requests per window: fixed window, sliding log, sliding counter
// and token bucket). The exercise and the reference solution each run it
// through a thin adapter, so both are held to exactly the same checks.
// Learners do not edit it.
//
// Every check is a subtest with a fixed name, such as
// TestCounting/SlidingCounter/MatchesModel. Most run inside
// testing/synctest bubbles that start at a random instant, where time.Now
// is fake and time.Sleep only moves the fake clock, so waits are checked to
// the nanosecond; the concurrency checks also run once on the real clock.
// Inputs are drawn at random from the run's seed (suitekit.Seed), mostly
// by rapid, which shrinks a failure to a small case and prints how to
// replay it. Every call into the code under test goes through a helper
// that turns a panic into a failure of that subtest only.
//
// The answers are compared with models written from the definitions alone:
// each model keeps every admitted request of a key and decides from them,
// and finds the wait by searching for the first nanosecond at which it
// would admit, rather than by a formula.
package countingsuite

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
)

// Limiter is what the suite drives: Allow decides one request of key now.
type Limiter interface {
	Allow(key string) (ok bool, wait time.Duration)
}

// Impl is the package under test: its four constructors and DefaultBurst.
// A limit is in requests, a window a time.Duration, a burst in tokens.
type Impl struct {
	FixedWindow    func(limit int, window time.Duration) Limiter
	SlidingLog     func(limit int, window time.Duration) Limiter
	SlidingCounter func(limit int, window time.Duration) Limiter
	TokenBucket    func(limit int, window time.Duration, burst int) Limiter
	DefaultBurst   func(limit int) int
}

// Run runs every check of task 8 as subtests of t, grouped by limiter:
// "FixedWindow/", "SlidingLog/", "SlidingCounter/" and "TokenBucket/".
func Run(t *testing.T, impl Impl) {
	kinds := []*kind{
		{name: "FixedWindow", ctor: "NewFixedWindow", newModel: newFixedModel, bound: fixedBound,
			open: func(limit int, window time.Duration, _ int) Limiter { return impl.FixedWindow(limit, window) }},
		{name: "SlidingLog", ctor: "NewSlidingLog", newModel: newLogModel, bound: logBound,
			open: func(limit int, window time.Duration, _ int) Limiter { return impl.SlidingLog(limit, window) }},
		{name: "SlidingCounter", ctor: "NewSlidingCounter", newModel: newCounterModel, bound: counterBound,
			open: func(limit int, window time.Duration, _ int) Limiter { return impl.SlidingCounter(limit, window) }},
		{name: "TokenBucket", ctor: "NewTokenBucket", newModel: newBucketModel, bound: bucketBound, bucket: true,
			open: impl.TokenBucket},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			checks := []check{
				// Properties: every case runs in a bubble of its own.
				{"MatchesModel", false, k.matchesModel},
				{"ExactWait", false, k.exactWait},
				{"BoundaryBurst", false, k.boundaryBurst},
				{"Concurrent", true, k.concurrent},
				{"ConcurrentRealClock", false, k.concurrentRealClock},
				{"KeyFlood", true, k.keyFlood},
				{"MemoryPerKey", true, k.memoryPerKey},
				{"Settings", true, k.settings},
			}
			if k.bucket {
				checks = append(checks, check{"DefaultBurst", true, func(t *testing.T) { defaultBurst(t, impl.DefaultBurst) }})
			}
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					if c.bubble {
						suitekit.Bubble(t, c.f)
					} else {
						c.f(t)
					}
				})
			}
		})
	}
}

// check is one subtest: its name, which grader/tasks.go maps to points,
// whether it runs in a synctest bubble (a rapid property makes one per
// case instead), and its body.
type check struct {
	name   string
	bubble bool
	f      func(*testing.T)
}

// kind is one of the four limiters: how to make it, its model and the bound
// it promises over any stretch of time.
type kind struct {
	name     string // the type, such as "SlidingLog"
	ctor     string // its constructor, such as "NewSlidingLog"
	open     func(limit int, window time.Duration, burst int) Limiter
	newModel func(s settings) model
	bound    func(s settings, admitted []int64) string
	bucket   bool // takes a burst
}

// settings are one limiter's: limit requests per window (nanoseconds), and
// the burst for a TokenBucket (0 for the others).
type settings struct {
	limit, window, burst int64
}

func (k *kind) describe(s settings) string {
	if k.bucket {
		return fmt.Sprintf("%s(%d, %v, %d)", k.ctor, s.limit, time.Duration(s.window), s.burst)
	}
	return fmt.Sprintf("%s(%d, %v)", k.ctor, s.limit, time.Duration(s.window))
}

// --- Calling the code under test ---

// subject is one limiter under test. Its methods return a report instead
// of panicking when the code does.
type subject struct {
	l    Limiter
	desc string // how it was made, such as "NewSlidingLog(3, 1.5s)"
}

// make calls the constructor of k; the string is a report if it panicked
// or returned nil.
func (k *kind) make(s settings) (*subject, string) {
	var l Limiter
	desc := k.describe(s)
	if msg := suitekit.Report(desc, func() { l = k.open(int(s.limit), time.Duration(s.window), int(s.burst)) }); msg != "" {
		return nil, msg
	}
	if l == nil {
		return nil, desc + " = nil; want a limiter"
	}
	return &subject{l: l, desc: desc}, ""
}

// mustMake is make for a check that is not a rapid property.
func (k *kind) mustMake(t testing.TB, s settings) *subject {
	t.Helper()
	x, msg := k.make(s)
	if msg != "" {
		t.Fatal(msg)
	}
	return x
}

func (x *subject) allow(key string) (ok bool, wait time.Duration, fail string) {
	if r, stack := suitekit.Catch(func() { ok, wait = x.l.Allow(key) }); r != nil {
		return ok, wait, suitekit.PanicReport(fmt.Sprintf("%s.Allow(%q)", x.desc, key), r, stack)
	}
	return ok, wait, ""
}

// batch runs f, which calls x.l bare (hundreds of thousands of calls
// are too many for a recover each), and fails t with f's message or with
// the report of a panic.
func (x *subject) batch(t testing.TB, f func() string) {
	t.Helper()
	var msg string
	if r, stack := suitekit.Catch(func() { msg = f() }); r != nil {
		t.Fatal(suitekit.PanicReport(x.desc+".Allow", r, stack))
	}
	if msg != "" {
		t.Fatal(msg)
	}
}

// now is the fake (or real) time in Unix nanoseconds, as the limiters see it.
func now() int64 { return time.Now().UnixNano() }

// sleepUntil sleeps until the Unix nanosecond at, if it is ahead.
func sleepUntil(at int64) {
	if d := at - now(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// --- Drawing settings and keys ---

// drawKey draws a client key: any bytes, the empty string included, so
// that no key name tells a test apart (suitekit.KeySet).
func drawKey(rt *rapid.T) string {
	return suitekit.KeySet(1).Draw(rt, "key")[0]
}

// randomKey returns a key of 4 to 19 random letters, digits and symbols
// for the checks that are not rapid properties.
func randomKey(rng *rand.Rand) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:-_@ "
	b := make([]byte, 4+rng.IntN(16))
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// drawSettings draws a limit and a window, and a burst for a TokenBucket:
// tiny windows, where every nanosecond is near a boundary, up to a day, and
// the round ones people use.
func (k *kind) drawSettings(rt *rapid.T, maxLimit int) settings {
	s := settings{
		limit: int64(rapid.OneOf(rapid.IntRange(1, 6), rapid.IntRange(1, maxLimit)).Draw(rt, "limit")),
		window: rapid.OneOf( // a failure shrinks towards the first: round windows read best
			rapid.SampledFrom([]int64{int64(time.Second), int64(time.Minute), int64(time.Hour)}),
			rapid.Int64Range(1, 1000),
			rapid.Int64Range(1000, int64(time.Second)),
			rapid.Int64Range(int64(time.Second), int64(24*time.Hour)),
		).Draw(rt, "window"),
	}
	if k.bucket {
		s.burst = rapid.Int64Range(1, s.limit).Draw(rt, "burst")
	}
	return s
}

// property runs a rapid property of a limiter: draw takes every random
// input, outside any bubble (rapid stops a case that runs out of data,
// while shrinking, with a panic it must catch on its own goroutine), and
// run plays it in a synctest bubble of its own, started at a random
// instant, returning a description of what broke, or "".
func property[P any](t *testing.T, draw func(rt *rapid.T) P, run func(p P) string) {
	t.Helper()
	suitekit.NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		p := draw(rt)
		var msg string
		suitekit.Bubble(t, func(*testing.T) { msg = run(p) })
		if msg != "" {
			rt.Fatal(msg)
		}
	})
}

// A pause is how long to sleep before a call, drawn up front and worked
// out when it is taken: often nothing, often a fraction of a window, to a
// window boundary or a nanosecond either side of it, exactly the last wait
// given or a nanosecond less, or several windows.
type pause struct {
	kind int    // 0 to 9
	raw  uint64 // the amount, scaled into the kind's range
}

func drawPause(rt *rapid.T) pause {
	return pause{kind: rapid.IntRange(0, 9).Draw(rt, "pause"), raw: rapid.Uint64().Draw(rt, "amount")}
}

// in returns a number in [lo, hi] from the pause's raw amount.
func (p pause) in(lo, hi int64) int64 {
	return lo + int64(p.raw%uint64(hi-lo+1))
}

// take sleeps the pause for a limiter with settings s, where lastWait is
// the last wait the key was given.
func (p pause) take(s settings, lastWait int64) {
	var d int64
	switch p.kind {
	case 0, 1:
	case 2:
		d = p.in(1, max(1, s.window/s.limit))
	case 3, 4:
		d = p.in(0, 2*s.window)
	case 5:
		n := now()
		d = (floorDiv(n, s.window)+1)*s.window - n + p.in(-1, 1)
	case 6:
		d = lastWait
	case 7:
		d = lastWait - 1
	case 8:
		d = p.in(2*s.window, 5*s.window)
	case 9:
		d = p.in(0, max(1, s.window/100))
	}
	if d > 0 {
		time.Sleep(time.Duration(d))
	}
}

// --- Models ---

// A model decides like a correct limiter from the definition alone.
// admits reports whether a request of key at instant at (Unix nanoseconds,
// never before the last commit) would be admitted; commit records one that
// was.
type model interface {
	admits(key string, at int64) bool
	commit(key string, at int64)
	rule() string // the definition, for failure messages
}

// answer is the correct reply to Allow(key) at now under m, committing an
// admitted request: (true, 0), or (false, the least d ≥ 1 at which m would
// admit), found by doubling then bisecting. Whether a key is admitted only
// goes from no to yes as time passes without admissions (counts drop out of
// the window, weights fall, tokens drip in), so the search is sound.
func answer(m model, key string, now int64) (ok bool, wait int64) {
	if m.admits(key, now) {
		m.commit(key, now)
		return true, 0
	}
	lo, hi := int64(0), int64(1) // m refuses at now+lo, admits at now+hi once found
	for !m.admits(key, now+hi) {
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if m.admits(key, now+mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return false, hi
}

// history is every admitted request of each key, oldest first, as the
// window models keep it. Requests more than three windows old can no longer
// matter and are dropped.
type history struct {
	s    settings
	keys map[string][]int64
}

func newHistory(s settings) history { return history{s: s, keys: map[string][]int64{}} }

func (h *history) commit(key string, at int64) {
	ts := h.keys[key]
	i := 0
	for i < len(ts) && ts[i] <= at-3*h.s.window {
		i++
	}
	h.keys[key] = append(ts[i:], at)
}

// count returns how many of key's requests were admitted at instants in
// (from, to].
func (h *history) count(key string, from, to int64) int64 {
	var n int64
	for _, t := range h.keys[key] {
		if t > from && t <= to {
			n++
		}
	}
	return n
}

// inWindow returns how many of key's requests were admitted in aligned
// window w, [w×window, (w+1)×window).
func (h *history) inWindow(key string, w int64) int64 {
	var n int64
	for _, t := range h.keys[key] {
		if floorDiv(t, h.s.window) == w {
			n++
		}
	}
	return n
}

type fixedModel struct{ history }

func newFixedModel(s settings) model { return &fixedModel{newHistory(s)} }

func (m *fixedModel) admits(key string, at int64) bool {
	return m.inWindow(key, floorDiv(at, m.s.window)) < m.s.limit
}

func (m *fixedModel) rule() string {
	return "a key's requests are counted per window aligned on the Unix epoch ([k×window, (k+1)×window) in Unix nanoseconds), " +
		"each key on its own; a request is admitted while fewer than limit were admitted in its window, and a refused one waits until the window ends"
}

type logModel struct{ history }

func newLogModel(s settings) model { return &logModel{newHistory(s)} }

func (m *logModel) admits(key string, at int64) bool {
	return m.count(key, at-m.s.window, at) < m.s.limit
}

func (m *logModel) rule() string {
	return "a request admitted at t counts while now − window < t ≤ now (it stops counting at exactly t + window), " +
		"each key on its own; a request is admitted while fewer than limit count, and a refused one waits until the oldest stops counting"
}

type counterModel struct{ history }

func newCounterModel(s settings) model { return &counterModel{newHistory(s)} }

// admits: prev × (window − elapsed) + (cur + 1) × window ≤ limit × window,
// in big integers so that nothing overflows.
func (m *counterModel) admits(key string, at int64) bool {
	w := floorDiv(at, m.s.window)
	elapsed := at - w*m.s.window
	cur, prev := m.inWindow(key, w), m.inWindow(key, w-1)
	lhs := new(big.Int).Mul(big.NewInt(prev), big.NewInt(m.s.window-elapsed))
	lhs.Add(lhs, new(big.Int).Mul(big.NewInt(cur+1), big.NewInt(m.s.window)))
	rhs := new(big.Int).Mul(big.NewInt(m.s.limit), big.NewInt(m.s.window))
	return lhs.Cmp(rhs) <= 0
}

func (m *counterModel) rule() string {
	return "with cur and prev the key's counts in the current and the previous window (aligned on the Unix epoch) and elapsed the time " +
		"since the current one started, a request is admitted when prev × (window − elapsed)/window + cur + 1 ≤ limit, exactly " +
		"(the previous window weighted by the share of it still in view); a refused one waits until that holds"
}

// bucketModel is a token bucket per key in exact arithmetic: it gains
// limit/window tokens per nanosecond, holds at most burst, starts full, and
// each request takes one. Every amount of tokens it meets is a whole number
// of 1/window tokens, so it keeps tokens × window, in big integers.
type bucketModel struct {
	s       settings
	buckets map[string]*bucketState
}

type bucketState struct {
	scaled big.Int // tokens × window at last
	last   int64
}

func newBucketModel(s settings) model { return &bucketModel{s: s, buckets: map[string]*bucketState{}} }

// scaled returns tokens × window held at at: min(burst, tokens +
// (at − last) × limit/window), times window.
func (m *bucketModel) scaled(key string, at int64) *big.Int {
	full := new(big.Int).Mul(big.NewInt(m.s.burst), big.NewInt(m.s.window))
	b := m.buckets[key]
	if b == nil {
		return full
	}
	r := new(big.Int).Mul(big.NewInt(at-b.last), big.NewInt(m.s.limit))
	r.Add(r, &b.scaled)
	if r.Cmp(full) > 0 {
		return full
	}
	return r
}

func (m *bucketModel) admits(key string, at int64) bool {
	return m.scaled(key, at).Cmp(big.NewInt(m.s.window)) >= 0 // one token
}

func (m *bucketModel) commit(key string, at int64) {
	r := m.scaled(key, at)
	b := &bucketState{last: at}
	b.scaled.Sub(r, big.NewInt(m.s.window))
	m.buckets[key] = b
}

func (m *bucketModel) rule() string {
	return "each key has a bucket that holds at most burst tokens, starts full and gains limit tokens per window, continuously; " +
		"a request takes one token, and a refused one waits ⌈(1 − tokens) × window/limit⌉ ns"
}

// --- MatchesModel ---

// matchesModel drives a limiter through random sequences of pauses and
// calls for a few keys, from a random instant, and compares every answer
// with the model's.
func (k *kind) matchesModel(t *testing.T) {
	type step struct {
		key   int
		pause pause
		calls int
	}
	type plan struct {
		s     settings
		phase int64
		keys  []string
		steps []step
	}
	property(t, func(rt *rapid.T) plan {
		p := plan{s: k.drawSettings(rt, 30)}
		p.phase = rapid.Int64Range(0, 3*p.s.window).Draw(rt, "phase") // any phase against the windows
		// Distinct keys of any bytes, some a case, a space, a last byte or
		// a NUL away from another: each is a client of its own.
		p.keys = suitekit.KeySet(rapid.IntRange(1, 4).Draw(rt, "keys")).Draw(rt, "key set")
		for range rapid.IntRange(1, 50).Draw(rt, "steps") {
			st := step{key: rapid.IntRange(0, len(p.keys)-1).Draw(rt, "which"), pause: drawPause(rt), calls: 1}
			if rapid.IntRange(0, 3).Draw(rt, "many") == 0 {
				st.calls = rapid.IntRange(1, int(p.s.limit)+2).Draw(rt, "calls")
			}
			p.steps = append(p.steps, st)
		}
		return p
	}, func(p plan) string {
		time.Sleep(time.Duration(p.phase))
		x, msg := k.make(p.s)
		if msg != "" {
			return msg
		}
		m := k.newModel(p.s)
		var (
			log      []string
			t0       = now() // when the limiter was made, for offsets in messages
			lastWait = map[string]int64{}
		)
		for i, st := range p.steps {
			key := p.keys[st.key]
			st.pause.take(p.s, lastWait[key])
			for range st.calls {
				at := now()
				ok, wait, fail := x.allow(key)
				if fail != "" {
					return fail
				}
				log = append(log, fmt.Sprintf("  t0+%v: Allow(%s) = (%v, %v)", time.Duration(at-t0), suitekit.QuoteKey(key), ok, wait))
				wantOK, wantWait := answer(m, key, at)
				if ok != wantOK || int64(wait) != wantWait {
					return fmt.Sprintf("%s, step %d at %s: Allow(%s) = (%v, %v); want (%v, %v)\nthe rule: %s\nthe keys are %d distinct clients, whatever their bytes; calls so far, t0 = when the limiter was made:\n%s",
						x.desc, i, phaseOf(at, p.s.window), suitekit.QuoteKey(key), ok, wait, wantOK, time.Duration(wantWait), m.rule(), len(p.keys), strings.Join(lastLines(log, 12), "\n"))
				}
				lastWait[key] = int64(wait)
			}
		}
		return ""
	})
}

// phaseOf describes an instant by where it falls in its window.
func phaseOf(at, window int64) string {
	return fmt.Sprintf("%v into window %d", time.Duration(at-floorDiv(at, window)*window), floorDiv(at, window))
}

func lastLines(lines []string, n int) []string {
	if len(lines) > n {
		return append([]string{"  …"}, lines[len(lines)-n:]...)
	}
	return lines
}

// --- ExactWait ---

// exactWait builds a random state for one key, calls until refused, then
// retries a nanosecond before the wait it was given, which must be refused
// with a wait of exactly 1ns, and at the wait, which must be admitted.
func (k *kind) exactWait(t *testing.T) {
	type plan struct {
		s      settings
		phase  int64
		key    string
		rounds []pause
	}
	property(t, func(rt *rapid.T) plan {
		p := plan{s: k.drawSettings(rt, 30), key: drawKey(rt)}
		p.phase = rapid.Int64Range(0, 3*p.s.window).Draw(rt, "phase")
		for range rapid.IntRange(1, 4).Draw(rt, "rounds") {
			p.rounds = append(p.rounds, drawPause(rt))
		}
		return p
	}, func(p plan) string {
		s := p.s
		time.Sleep(time.Duration(p.phase))
		x, msg := k.make(s)
		if msg != "" {
			return msg
		}
		m := k.newModel(s)
		key := p.key
		call := func(why string) (ok bool, wait time.Duration, msg string) {
			at := now()
			ok, wait, fail := x.allow(key)
			if fail != "" {
				return ok, wait, fail
			}
			wantOK, wantWait := answer(m, key, at)
			if ok != wantOK || int64(wait) != wantWait {
				return ok, wait, fmt.Sprintf("%s at %s: Allow(%q) = (%v, %v); want (%v, %v)\n%s\nthe rule: %s",
					x.desc, phaseOf(at, s.window), key, ok, wait, wantOK, time.Duration(wantWait), why, m.rule())
			}
			return ok, wait, ""
		}
		for round, pause := range p.rounds {
			pause.take(s, 0)
			var wait time.Duration
			for {
				ok, w, msg := call(fmt.Sprintf("round %d: calls at one instant until one is refused", round))
				if msg != "" {
					return msg
				}
				if !ok {
					wait = w
					break
				}
			}
			if wait > 1 {
				time.Sleep(wait - 1)
				if _, _, msg := call(fmt.Sprintf("a retry 1ns before the wait given (%v) must be refused, and then the shortest wait is 1ns", wait)); msg != "" {
					return msg
				}
				time.Sleep(time.Nanosecond)
			} else {
				time.Sleep(wait)
			}
			if _, _, msg := call(fmt.Sprintf("a caller that sleeps exactly the wait it was given (%v) and retries must be admitted: round the wait up, never down", wait)); msg != "" {
				return msg
			}
		}
		return ""
	})
}

// --- BoundaryBurst ---

// boundaryBurst sends limit requests of one key in the last moment δ of a
// window and limit more in the first δ of the next, with random traffic
// before and after, and checks the limiter against its own promise over
// every stretch of the trace: the fixed window takes all 2 × limit, the
// log never more than limit per window, the counter within its
// approximation's bound and the bucket within burst + limit × T/window.
func (k *kind) boundaryBurst(t *testing.T) {
	type plan struct {
		s             settings
		key           string
		before, after []pause
		delta         int64
	}
	property(t, func(rt *rapid.T) plan {
		p := plan{s: k.drawSettings(rt, 40), key: drawKey(rt)}
		for range rapid.IntRange(0, 10).Draw(rt, "before") {
			p.before = append(p.before, drawPause(rt))
		}
		p.delta = rapid.Int64Range(1, max(1, p.s.window/8)).Draw(rt, "δ")
		for range rapid.IntRange(0, 20).Draw(rt, "after") {
			p.after = append(p.after, drawPause(rt))
		}
		return p
	}, func(p plan) string {
		s := p.s
		x, msg := k.make(s)
		if msg != "" {
			return msg
		}
		key := p.key
		var admitted []int64
		call := func() (bool, string) {
			at := now()
			ok, wait, fail := x.allow(key)
			if fail != "" {
				return false, fail
			}
			if ok {
				admitted = append(admitted, at)
			}
			if ok != (wait == 0) {
				return false, fmt.Sprintf("%s: Allow(%q) = (%v, %v); want wait 0 exactly when ok", x.desc, key, ok, wait)
			}
			return ok, ""
		}
		for _, pause := range p.before {
			pause.take(s, 0)
			if _, msg := call(); msg != "" {
				return msg
			}
		}
		// Quiet for three windows, so that the burst meets a key with
		// nothing counted and a full bucket.
		time.Sleep(time.Duration(3 * s.window))
		delta := p.delta
		boundary := (floorDiv(now()+delta, s.window) + 1) * s.window
		var got [2]int64 // admitted before and after the boundary
		for half := range got {
			from := boundary - delta + int64(half)*delta
			for i := range s.limit {
				sleepUntil(from + i*delta/s.limit)
				ok, msg := call()
				if msg != "" {
					return msg
				}
				if ok {
					got[half]++
				}
			}
		}
		burst := fmt.Sprintf("%d requests in the %v before a window boundary and %d in the %v after it admitted %d and %d",
			s.limit, time.Duration(delta), s.limit, time.Duration(delta), got[0], got[1])
		if msg := k.boundaryExpect(s, delta, got); msg != "" {
			return fmt.Sprintf("%s: %s; %s", x.desc, burst, msg)
		}
		for _, pause := range p.after {
			pause.take(s, 0)
			if _, msg := call(); msg != "" {
				return msg
			}
		}
		if msg := k.bound(s, admitted); msg != "" {
			return fmt.Sprintf("%s: %s\n(the trace: random calls, three quiet windows, then %s, then random calls)", x.desc, msg, burst)
		}
		return ""
	})
}

// boundaryExpect checks what each limiter must admit of the burst around
// the boundary, from a quiet key: a fixed window counts each window on its
// own, so takes both halves; the log and the counter take the first half
// whole, and the log nothing of the second unless the window is shorter
// than the whole burst (2δ); a bucket starts with burst tokens.
func (k *kind) boundaryExpect(s settings, delta int64, got [2]int64) string {
	switch k.name {
	case "FixedWindow":
		if got[0] != s.limit || got[1] != s.limit {
			return fmt.Sprintf("want %d and %d: each window counts on its own, so a fixed window lets 2 × limit through around a boundary", s.limit, s.limit)
		}
	case "SlidingLog":
		if got[0] != s.limit || (2*delta <= s.window && got[1] != 0) {
			return fmt.Sprintf("want %d and 0: the first %d all still count after the boundary", s.limit, s.limit)
		}
	case "SlidingCounter":
		if got[0] != s.limit {
			return fmt.Sprintf("want all %d before the boundary: the key was quiet for three windows", s.limit)
		}
	case "TokenBucket":
		if got[0] < s.burst {
			return fmt.Sprintf("want at least burst=%d before the boundary: a bucket quiet for three windows is full", s.burst)
		}
	}
	return ""
}

// fixedBound: at most limit in every aligned window.
func fixedBound(s settings, admitted []int64) string {
	n := map[int64]int64{}
	for _, t := range admitted {
		w := floorDiv(t, s.window)
		if n[w]++; n[w] > s.limit {
			return fmt.Sprintf("window %d (aligned on the Unix epoch) admitted %d requests of one key; want at most limit=%d", w, n[w], s.limit)
		}
	}
	return ""
}

// logBound: at most limit in every stretch (t − window, t].
func logBound(s settings, admitted []int64) string {
	for j, t := range admitted {
		i := j
		for i > 0 && admitted[i-1] > t-s.window {
			i--
		}
		if n := int64(j - i + 1); n > s.limit {
			return fmt.Sprintf("the stretch (t − window, t] ending at the admission at %s holds %d admitted requests of one key; "+
				"want at most limit=%d in any stretch of one window", phaseOf(t, s.window), n, s.limit)
		}
	}
	return ""
}

// counterBound: in every stretch (t − window, t], at most
// limit + ⌊prev × e/window⌋, where prev is the count of the window before
// t's and e how far t is into its window. At t's last admission in its
// window, the counter checked prev × (window − e′) + cur × window ≤
// limit × window with e′ ≤ e; the stretch holds cur plus at most prev
// from the window before, so at most limit + prev × e/window.
func counterBound(s settings, admitted []int64) string {
	for j, t := range admitted {
		i := j
		for i > 0 && admitted[i-1] > t-s.window {
			i--
		}
		n := int64(j - i + 1)
		w := floorDiv(t, s.window)
		var prev int64
		for _, u := range admitted {
			if floorDiv(u, s.window) == w-1 {
				prev++
			}
		}
		e := t - w*s.window
		extra := new(big.Int).Mul(big.NewInt(prev), big.NewInt(e))
		extra.Quo(extra, big.NewInt(s.window))
		if most := s.limit + extra.Int64(); n > most {
			return fmt.Sprintf("the stretch (t − window, t] ending at the admission at %s holds %d admitted requests of one key; "+
				"want at most limit + ⌊prev × e/window⌋ = %d + ⌊%d × %v/%v⌋ = %d, the most a counter that weights the previous window's %d requests "+
				"by the share still in view can let through", phaseOf(t, s.window), n, s.limit, prev, time.Duration(e), time.Duration(s.window), most, prev)
		}
	}
	return ""
}

// bucketBound: in every stretch [a, b], at most burst + limit × (b − a)/window.
func bucketBound(s settings, admitted []int64) string {
	for i, a := range admitted {
		for j := i; j < len(admitted); j++ {
			b := admitted[j]
			n := int64(j - i + 1)
			// n × window ≤ burst × window + limit × (b − a)
			lhs := new(big.Int).Mul(big.NewInt(n), big.NewInt(s.window))
			rhs := new(big.Int).Mul(big.NewInt(s.burst), big.NewInt(s.window))
			rhs.Add(rhs, new(big.Int).Mul(big.NewInt(s.limit), big.NewInt(b-a)))
			if lhs.Cmp(rhs) > 0 {
				return fmt.Sprintf("%d requests of one key were admitted within %v; want at most burst + limit × T/window = %d + %d × %v/%v",
					n, time.Duration(b-a), s.burst, s.limit, time.Duration(b-a), time.Duration(s.window))
			}
		}
	}
	return ""
}

// --- Concurrency ---

// hammer has goroutines call Allow for a few keys at once, each key far
// more often than its limit, and returns how many each key got through.
func hammer(t *testing.T, x *subject, keys []string, callsPerKey int) []int64 {
	t.Helper()
	const goroutines = 4
	admitted := make([]atomic.Int64, len(keys))
	suitekit.Hammer(t, goroutines, x.desc+".Allow", func(int) {
		for i := range callsPerKey * len(keys) / goroutines {
			k := i % len(keys) // all goroutines on the same key at once
			if ok, _ := x.l.Allow(keys[k]); ok {
				admitted[k].Add(1)
			}
		}
	})
	out := make([]int64, len(keys))
	for i := range admitted {
		out[i] = admitted[i].Load()
	}
	return out
}

// concurrent hammers a limiter from four goroutines with no fake time
// passing: each key must get exactly limit (a bucket: burst) through. A
// read-modify-write without a lock loses updates and lets more through,
// not in every round (about half, on a busy machine), so there are 24;
// -race reports a lock missing altogether.
func (k *kind) concurrent(t *testing.T) {
	rng := suitekit.Rand(t)
	for round := range 24 {
		// A large burst: only admissions write, so the goroutines must
		// overlap while there are many of them.
		s := settings{limit: 200 + rng.Int64N(800), window: int64(time.Second) + rng.Int64N(int64(time.Hour))}
		if k.bucket {
			s.burst = s.limit/2 + 1 + rng.Int64N(s.limit/2)
		}
		x := k.mustMake(t, s)
		keys := []string{randomKey(rng), "", randomKey(rng) + strings.Repeat("long", rng.IntN(20))}
		got := hammer(t, x, keys, int(2*s.limit))
		want := s.limit
		if k.bucket {
			want = s.burst
		}
		for i, n := range got {
			if n != want {
				t.Fatalf("round %d: %s: 4 goroutines made %d calls for key %q at one instant and %d were admitted; want exactly %d\n"+
					"more means lost updates: Allow must hold a mutex while it reads and writes a key's state",
					round, x.desc, 2*s.limit, keys[i], n, want)
			}
		}
	}
}

// concurrentRealClock is concurrent on the real clock, with a one-day
// window; a fixed window or a counter whose window ended during the run
// may let up to twice as many through, and a bucket what dripped in.
func (k *kind) concurrentRealClock(t *testing.T) {
	rng := suitekit.Rand(t)
	const day = int64(24 * time.Hour)
	for round := range 2 {
		s := settings{limit: 50 + rng.Int64N(300), window: day}
		if k.bucket {
			s.burst = 1 + rng.Int64N(s.limit)
		}
		x := k.mustMake(t, s)
		keys := []string{randomKey(rng), randomKey(rng) + "/" + strconv.Itoa(round)}
		start := now()
		got := hammer(t, x, keys, int(3*s.limit))
		end := now()
		least, most := s.limit, s.limit
		switch {
		case k.bucket:
			least = s.burst
			most = s.burst + (s.limit*(end-start)+day-1)/day
		case k.name != "SlidingLog" && floorDiv(start, day) != floorDiv(end, day):
			least, most = 1, 2*s.limit
		}
		for i, n := range got {
			if n < least || n > most {
				t.Fatalf("round %d, real clock: %s: 4 goroutines made %d calls for key %q within %v and %d were admitted; want %s\n"+
					"Allow must hold a mutex while it reads and writes a key's state",
					round, x.desc, 3*s.limit, keys[i], time.Duration(end-start), n, between(least, most))
			}
		}
	}
}

func between(least, most int64) string {
	if least == most {
		return fmt.Sprintf("exactly %d", least)
	}
	return fmt.Sprintf("between %d and %d", least, most)
}

// --- Memory ---

// heapAlloc returns the live heap after two collections (the second takes
// what the first left for finalizers and sweeping).
func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// Key flood: every window, a few thousand new keys each send limit
// requests, which leaves them throttled (a sample of them also sends one
// more, which is refused). Throttled keys must stay
// throttled (their state kept, checked against the model for a sample of
// keys, the first of every batch among them, in their own window and in
// the next) while the memory follows the keys of the last windows, not all
// of them. The number of keys per window is random, so no single size at
// which a limiter drops or resets its state passes both.
const (
	floodWindows = 120
	floodMinKeys = 2000
	floodMaxKeys = 4000
	floodBatches = 4
	// floodPerKey is what a key of the last few windows may cost: its
	// string, a map entry or two and up to three timestamps, with room.
	// The limiters are promised to follow the keys of the last window or
	// two; four windows' worth are allowed.
	floodPerKey   = 200
	floodKeptKeys = 4 * floodMaxKeys
	floodSlack    = 512 << 10
)

func (k *kind) keyFlood(t *testing.T) {
	rng := suitekit.Rand(t)
	s := settings{limit: 1 + rng.Int64N(2), window: int64(time.Second) + rng.Int64N(int64(time.Minute))}
	if k.bucket {
		s.burst = s.limit
	}
	m := k.newModel(s) // for the sampled keys only
	before := heapAlloc()
	x := k.mustMake(t, s)
	sleepUntil((floorDiv(now(), s.window) + 1) * s.window)
	var (
		prefix        = randomKey(rng) + "-"
		total         int
		samples, prev []string
		buf           []byte
	)
	// check compares a sampled key's answer with the model's.
	check := func(key string, what string) string {
		at := now()
		ok, wait := x.l.Allow(key)
		if wantOK, wantWait := answer(m, key, at); ok != wantOK || int64(wait) != wantWait {
			return fmt.Sprintf("%s, flood of %d keys so far, %s: Allow(%q) = (%v, %v); want (%v, %v)\n"+
				"a key's state must survive a flood of other keys: forget a key only once its past requests no longer count\nthe rule: %s",
				x.desc, total, what, key, ok, wait, wantOK, time.Duration(wantWait), m.rule())
		}
		return ""
	}
	for range floodWindows {
		start := floorDiv(now(), s.window) * s.window
		n := floodMinKeys + rng.IntN(floodMaxKeys-floodMinKeys+1)
		samples = samples[:0:0]
		for b := range floodBatches {
			sleepUntil(start + int64(b+1)*s.window/(floodBatches+2))
			x.batch(t, func() string {
				for i := b * n / floodBatches; i < (b+1)*n/floodBatches; i++ {
					buf = strconv.AppendInt(append(buf[:0], prefix...), int64(total), 10)
					key := string(buf) // a fresh string the limiter may keep
					total++
					if i == b*n/floodBatches || rng.IntN(500) == 0 {
						samples = append(samples, key)
						for range s.limit + 1 {
							if msg := check(key, "a new key's calls"); msg != "" {
								return msg
							}
						}
						continue
					}
					for c := range s.limit {
						if ok, wait := x.l.Allow(key); !ok {
							return fmt.Sprintf("%s, flood of %d keys so far: call %d for the new key %q = (%v, %v); want (true, 0s): a new key has nothing counted (a full bucket)",
								x.desc, total, c+1, key, ok, wait)
						}
					}
				}
				return ""
			})
		}
		sleepUntil(start + int64(floodBatches+1)*s.window/(floodBatches+2))
		x.batch(t, func() string {
			for _, key := range samples {
				if msg := check(key, "later in the window of its first calls"); msg != "" {
					return msg
				}
			}
			for _, key := range prev {
				if msg := check(key, "in the window after its first calls"); msg != "" {
					return msg
				}
			}
			return ""
		})
		prev = samples
		sleepUntil(start + s.window) // the next window
	}
	grown := heapAlloc() - before
	runtime.KeepAlive(x.l)
	if limit := int64(floodPerKey*floodKeptKeys + floodSlack); grown > limit {
		t.Fatalf("%s: after %d distinct keys over %d windows (%d to %d a window), the live heap grew by %.1f MB; want under %.1f MB "+
			"(%d bytes for each key of the last four windows)\nforget a key once none of its requests count any more (a bucket once it is full again)",
			x.desc, total, floodWindows, floodMinKeys, floodMaxKeys, float64(grown)/(1<<20), float64(limit)/(1<<20), floodPerKey)
	}
}

// memoryPerKey: a few keys each at a high limit. The log holds a
// timestamp per counted request, so its memory grows with the limit but
// must not grow with time: each key sends its limit every window for
// many windows, and at most a few times limit timestamps per key may be
// kept. The others hold two numbers per key, whatever the limit.
func (k *kind) memoryPerKey(t *testing.T) {
	rng := suitekit.Rand(t)
	keys := make([]string, 6+rng.IntN(4))
	for i := range keys {
		keys[i] = randomKey(rng) + "#" + strconv.Itoa(i)
	}
	if k.name == "SlidingLog" {
		k.logKeepsLittle(t, rng.Int64N(41)+80, keys)
		return
	}
	s := settings{limit: 8000 + rng.Int64N(4000), window: int64(time.Minute)}
	if k.bucket {
		s.burst = s.limit
	}
	before := heapAlloc()
	x := k.mustMake(t, s)
	x.batch(t, func() string {
		for _, key := range keys {
			for range s.limit {
				if ok, wait := x.l.Allow(key); !ok {
					return fmt.Sprintf("%s: Allow(%q) = (false, %v) at one instant before the key's limit was reached; want true", x.desc, key, wait)
				}
			}
		}
		return ""
	})
	grown := heapAlloc() - before
	runtime.KeepAlive(x.l)
	const perKey, slack = 1 << 10, 64 << 10
	if limit := int64(len(keys)*perKey + slack); grown > limit {
		t.Fatalf("%s: %d keys each at their limit of %d grew the live heap by %d kB (%d bytes a key); want under %d kB\n"+
			"this limiter needs a number or two per key, whatever the limit: keep counts (tokens), not a record of every request",
			x.desc, len(keys), s.limit, grown>>10, grown/int64(len(keys)), limit>>10)
	}
}

// logKeepsLittle: every key sends limit requests at the same offsets in
// every window, for many windows, all admitted; a log that prunes holds
// limit timestamps per key (up to a few times that with the slack of
// growing slices), one that never prunes holds every one.
func (k *kind) logKeepsLittle(t *testing.T, limit int64, keys []string) {
	const windows = 60
	s := settings{limit: limit, window: int64(time.Second)}
	before := heapAlloc()
	x := k.mustMake(t, s)
	start := (floorDiv(now(), s.window) + 1) * s.window
	for w := range int64(windows) {
		for i := range limit {
			sleepUntil(start + w*s.window + i*s.window/limit)
			x.batch(t, func() string {
				for _, key := range keys {
					if ok, wait := x.l.Allow(key); !ok {
						return fmt.Sprintf("%s: Allow(%q) = (false, %v) in window %d; want true: the key sends %d a window at the same offsets, so at most %d count at once",
							x.desc, key, wait, w, limit, limit-1)
					}
				}
				return ""
			})
		}
	}
	grown := heapAlloc() - before
	runtime.KeepAlive(x.l)
	const slack = 32 << 10
	perKey := 3*limit*8 + 512
	if most := int64(len(keys))*perKey + slack; grown > most {
		t.Fatalf("%s: %d keys each sending %d requests a window for %d windows grew the live heap by %d kB; want under %d kB "+
			"(three times limit timestamps a key)\ndrop timestamps once they stop counting: the log of a key never needs more than limit of them",
			x.desc, len(keys), limit, windows, grown>>10, most>>10)
	}
}

// --- Settings ---

// settings checks that the constructor panics on settings it cannot honour
// and accepts the edge cases it can.
func (k *kind) settings(t *testing.T) {
	rng := suitekit.Rand(t)
	const maxD = int64(^uint64(0) >> 1)
	ok := settings{limit: 1 + rng.Int64N(100), window: 1 + rng.Int64N(int64(time.Hour))}
	if k.bucket {
		ok.burst = 1 + rng.Int64N(ok.limit)
	}
	bad := []struct {
		s   settings
		why string
	}{
		{with(ok, func(s *settings) { s.limit = 0 }), "a limit of 0 admits nothing"},
		{with(ok, func(s *settings) { s.limit = -1 - rng.Int64N(1000) }), "a negative limit"},
		{with(ok, func(s *settings) { s.window = 0 }), "a window of 0"},
		{with(ok, func(s *settings) { s.window = -1 - rng.Int64N(int64(time.Hour)) }), "a negative window"},
		{with(ok, func(s *settings) {
			// Only the product is wrong: a bucket's burst stays within the
			// new limit, or a constructor could panic on the burst and
			// pass without checking the product (one seed in twenty did).
			s.limit = 2 + rng.Int64N(1000)
			s.window = maxD/s.limit + 1 + rng.Int64N(1000)
			s.burst = min(s.burst, s.limit)
		}), "limit × window overflows a Duration"},
	}
	good := []struct {
		s   settings
		why string
	}{
		{ok, "ordinary settings"},
		{with(ok, func(s *settings) { s.limit, s.burst = 1, min(s.burst, 1) }), "a limit of 1"},
		{with(ok, func(s *settings) { s.window = 1 }), "a window of 1ns"},
		{with(ok, func(s *settings) { s.window = maxD / s.limit }), "limit × window just within a Duration"},
	}
	if k.bucket {
		bad = append(bad,
			struct {
				s   settings
				why string
			}{with(ok, func(s *settings) { s.burst = 0 }), "a burst of 0"},
			struct {
				s   settings
				why string
			}{with(ok, func(s *settings) { s.burst = s.limit + 1 + rng.Int64N(100) }), "a burst above limit"})
		good = append(good,
			struct {
				s   settings
				why string
			}{with(ok, func(s *settings) { s.burst = 1 }), "a burst of 1"},
			struct {
				s   settings
				why string
			}{with(ok, func(s *settings) { s.burst = s.limit }), "a burst of limit"})
	}
	for _, c := range bad {
		r, stack := suitekit.Catch(func() { k.open(int(c.s.limit), time.Duration(c.s.window), int(c.s.burst)) })
		if r == nil {
			t.Fatalf("%s returned; want a panic: %s", k.describe(c.s), c.why)
		}
		if msg := suitekit.PanicReport(k.describe(c.s), r, stack); strings.Contains(msg, "not implemented") {
			t.Fatal(msg)
		}
	}
	for _, c := range good {
		if _, msg := k.make(c.s); msg != "" {
			t.Fatalf("%s: %s\n%s must be accepted", k.describe(c.s), msg, c.why)
		}
	}
}

func with(s settings, f func(*settings)) settings {
	f(&s)
	return s
}

// defaultBurst checks the burst the package chose, for limits at every
// scale: at least 1 and at most limit, the range NewTokenBucket accepts.
func defaultBurst(t *testing.T, burst func(limit int) int) {
	rng := suitekit.Rand(t)
	limits := []int{1, 2, 9, 10, 11}
	for range 200 {
		limits = append(limits, 1+rng.IntN([]int{10, 1000, 1e7}[rng.IntN(3)]))
	}
	for _, limit := range limits {
		var b int
		if msg := suitekit.Report(fmt.Sprintf("DefaultBurst(%d)", limit), func() { b = burst(limit) }); msg != "" {
			t.Fatal(msg)
		}
		if b < 1 || b > limit {
			t.Fatalf("DefaultBurst(%d) = %d; want between 1 and limit: a burst of 0 admits nothing, and one above limit lets a quiet "+
				"client through with more than a window's allowance at once", limit, b)
		}
	}
}
