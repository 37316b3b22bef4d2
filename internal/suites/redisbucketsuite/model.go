package redisbucketsuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// --- Model: random sequences, timed by Redis's own clock ---
//
// The model check calls tokenbucket.lua directly, in MULTI/EXEC
// transactions that put TIME before and after every call and read the
// key's PTTL after it. Redis runs a transaction as one step, so each call
// is bracketed to the microsecond by Redis's own clock, however slow the
// network or the machine: on a real Redis the check judges waits to the
// microsecond, with no slack for the calls' round trips. On miniredis the
// clock is set by the check and stands still within a transaction.
//
// For each key the check keeps the least and the most tokens the bucket
// can hold (the least if no time passed beyond what the brackets prove, the
// most if all the time they allow did), and judges every answer against
// both: a call must be admitted when even the least is enough and refused
// when even the most is not, and a refusal's wait must lie between the
// waits for the most and the least tokens, plus at most the millisecond a
// script may round up by.

// modelTolerance is how far from n, in tokens per token of burst (at least
// one), a bucket may be for either answer to be right: the rounding of
// float arithmetic, never a real difference.
const modelTolerance = 1e-6

// A modelCase is one random run: a bucket's settings and the calls made on
// a few keys, in transactions with pauses between them.
type modelCase struct {
	rate, burst float64
	start       time.Time // miniredis's clock at the start
	steps       []modelStep
}

// A modelStep pauses, then makes its calls in one transaction.
type modelStep struct {
	pause time.Duration
	calls []modelCall
}

// A modelCall asks key for n tokens, or, when rest is set, for what the
// model says the bucket holds plus rest·burst (about the boundary).
type modelCall struct {
	key  int
	n    float64
	rest bool
}

// drawModelCase draws a case. On a real Redis the pauses are real sleeps,
// so they stay short, and the rates high enough for them to matter.
func drawModelCase(t *rapid.T, fake bool) modelCase {
	var c modelCase
	if fake {
		c.rate = logUniform(t, "rate", 0.05, 5000)
		c.burst = burstOf(t, 0.1, 1000)
	} else {
		c.rate = logUniform(t, "rate", 20, 5000)
		c.burst = burstOf(t, 0.5, 100)
	}
	keys := rapid.IntRange(1, 3).Draw(t, "keys")
	for i, steps := 0, rapid.IntRange(1, 6).Draw(t, "steps"); i < steps; i++ {
		var st modelStep
		if i > 0 {
			st.pause = drawPause(t, fake, c.rate, c.burst)
		}
		for range rapid.IntRange(1, 3).Draw(t, "calls") {
			call := modelCall{key: rapid.IntRange(0, keys-1).Draw(t, "key")}
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0:
				call.n = c.burst
			case 1:
				call.n = c.burst * rapid.Float64Range(1.000001, 4).Draw(t, "over")
			case 2, 3:
				call.rest = true
				call.n = rapid.SampledFrom([]float64{-1e-3, -1e-7, 0, 1e-7, 1e-3, 0.05}).Draw(t, "rest")
			default:
				call.n = c.burst * rapid.Float64Range(0.001, 1).Draw(t, "share")
			}
			st.calls = append(st.calls, call)
		}
		c.steps = append(c.steps, st)
	}
	return c
}

// drawPause draws how long to wait before a step: on miniredis anything from
// a microsecond to hours, often the exact time some tokens take to drip in;
// on a real Redis nothing or a few milliseconds.
func drawPause(t *rapid.T, fake bool, rate, burst float64) time.Duration {
	if !fake {
		if rapid.Bool().Draw(t, "sleep") {
			return time.Duration(rapid.IntRange(1, 8).Draw(t, "sleep_ms")) * time.Millisecond
		}
		return 0
	}
	switch rapid.IntRange(0, 5).Draw(t, "pause_kind") {
	case 0:
		return 0
	case 1:
		return time.Duration(rapid.Int64Range(1, 999).Draw(t, "pause_us")) * time.Microsecond
	case 2:
		// The time tokens take to drip in, to the microsecond.
		tokens := burst * rapid.Float64Range(0.01, 1.2).Draw(t, "pause_tokens")
		return time.Duration(math.Round(tokens/rate*1e6)) * time.Microsecond
	case 3:
		return time.Duration(rapid.Int64Range(1, 3_600_000).Draw(t, "pause_ms")) * time.Millisecond
	default:
		return time.Duration(rapid.Int64Range(1, 2_000_000).Draw(t, "pause_us")) * time.Microsecond
	}
}

// logUniform draws a number between lo and hi whose logarithm is uniform,
// so that every order of magnitude gets its share.
func logUniform(t *rapid.T, label string, lo, hi float64) float64 {
	return math.Exp(rapid.Float64Range(math.Log(lo), math.Log(hi)).Draw(t, label))
}

// burstOf draws a burst: a whole number or a fraction, between lo and hi.
func burstOf(t *rapid.T, lo, hi float64) float64 {
	b := logUniform(t, "burst", lo, hi)
	if rapid.Bool().Draw(t, "whole_burst") {
		b = math.Max(1, math.Round(b))
	}
	return b
}

// bucketModel is what the check knows about one key's bucket.
type bucketModel struct {
	seen     bool
	lo, hi   float64 // the least and the most tokens it can hold
	from, to int64   // Redis's clock around the call after which lo and hi held (µs)
}

// advance moves the bounds to a call made between Redis times from and to.
func (m *bucketModel) advance(rate, burst float64, from, to int64) {
	if !m.seen {
		// A key never used is a full bucket.
		m.seen, m.lo, m.hi = true, burst, burst
	} else {
		least := max(0, from-m.to)
		most := max(0, to-m.from)
		m.lo = math.Min(burst, m.lo+float64(least)*rate/1e6)
		m.hi = math.Min(burst, m.hi+float64(most)*rate/1e6)
	}
	m.from, m.to = from, to
}

// A timedCall is what one call of a transaction returned, with Redis's
// clock before and after it (µs) and the key's PTTL right after.
type timedCall struct {
	key       string
	n         float64
	from, to  int64
	ok        bool
	wait      time.Duration
	err       error
	pttl      time.Duration // -1: no expiry; -2: no key
	pttlUntil int64         // Redis's clock after the PTTL (µs)
}

// scriptSHA loads the script into e's server and returns its SHA-1, or
// fails the check (with the stub's TODO if the script says so).
func (e *env) scriptSHA() string {
	e.t.Helper()
	ctx := context.Background()
	sha, err := e.rdb.ScriptLoad(ctx, e.s.script).Result()
	if err != nil {
		e.t.Fatalf("SCRIPT LOAD tokenbucket.lua: %v\nthe script does not compile", err)
	}
	// One call, to name a stub by its TODO and a broken script by its error.
	key := e.key("probe")
	err = e.rdb.EvalSha(ctx, sha, []string{key}, "1", "1", "1").Err()
	if err != nil && strings.Contains(err.Error(), lab.ErrNotImplemented.Error()) {
		e.t.Fatal((&lab.TODO{Task: 6, What: "tokenbucket.lua"}).Error())
	}
	return sha
}

// timedCalls makes the calls in one MULTI/EXEC: TIME, EVALSHA, TIME, PTTL
// for each, and a last TIME.
func timedCalls(ctx context.Context, rdb *redis.Client, sha string, rate, burst float64, keys []string, ns []float64) ([]timedCall, error) {
	type cmds struct {
		before *redis.TimeCmd
		eval   *redis.Cmd
		after  *redis.TimeCmd
		pttl   *redis.DurationCmd
	}
	all := make([]cmds, len(keys))
	var last *redis.TimeCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			all[i].before = p.Time(ctx)
			all[i].eval = p.EvalSha(ctx, sha, []string{key}, arg(rate), arg(burst), arg(ns[i]))
			all[i].after = p.Time(ctx)
			all[i].pttl = p.PTTL(ctx, key)
		}
		last = p.Time(ctx)
		return nil
	})
	// A script error is one command's error; anything else is the
	// transaction's.
	if err != nil && !errors.Is(err, redis.Nil) {
		var scriptErr bool
		for _, c := range all {
			if c.eval != nil && c.eval.Err() != nil {
				scriptErr = true
			}
		}
		if !scriptErr {
			return nil, err
		}
	}
	out := make([]timedCall, len(keys))
	for i, c := range all {
		tc := &out[i]
		tc.key, tc.n = keys[i], ns[i]
		tc.from, tc.to = c.before.Val().UnixMicro(), c.after.Val().UnixMicro()
		tc.pttl = c.pttl.Val()
		tc.pttlUntil = last.Val().UnixMicro()
		if i+1 < len(all) {
			tc.pttlUntil = all[i+1].before.Val().UnixMicro()
		}
		reply, err := c.eval.Slice()
		if err != nil {
			tc.err = err
			continue
		}
		tc.ok, tc.wait, tc.err = decodeReply(reply)
	}
	return out, nil
}

// arg formats a number as the limiter does: a plain decimal, never an
// exponent.
func arg(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// decodeReply reads the script's reply {allowed, wait} as redisbucket.go
// does: allowed is 1 or 0; wait is milliseconds, an integer or a decimal
// string, rounded up to the nanosecond, and negative for never.
func decodeReply(reply []any) (ok bool, wait time.Duration, err error) {
	if len(reply) != 2 {
		return false, 0, fmt.Errorf("the script returned %#v: %d values; want {allowed, wait}", reply, len(reply))
	}
	switch reply[0] {
	case int64(1):
		ok = true
	case int64(0):
	default:
		return false, 0, fmt.Errorf("the script returned %#v: allowed is not 1 or 0 (Redis turns Lua true into 1 and false into nil)", reply)
	}
	var ms float64
	switch w := reply[1].(type) {
	case int64:
		ms = float64(w)
	case string:
		ms, err = strconv.ParseFloat(w, 64)
		if err != nil {
			return false, 0, fmt.Errorf("the script returned %#v: the wait %q is not a number", reply, w)
		}
	default:
		return false, 0, fmt.Errorf("the script returned %#v: the wait is neither an integer nor a string", reply)
	}
	if ms < 0 {
		return ok, lab.InfDuration, nil
	}
	ns := math.Ceil(ms * 1e6)
	if ns >= float64(math.MaxInt64) {
		return ok, lab.InfDuration, nil
	}
	return ok, time.Duration(ns), nil
}

func (s *suite) model(e *env) {
	sha := e.scriptSHA()
	ctx := context.Background()
	var cases int
	rapid.Check(e.t, func(t *rapid.T) {
		c := drawModelCase(t, e.fake())
		cases++
		if e.fake() {
			c.start = randomInstant(e.rng)
			e.clock = c.start
			e.mr.SetTime(e.clock)
		}
		names := make([]string, 3)
		for i := range names {
			names[i] = fmt.Sprintf("%s%d-%d", e.prefix, cases, i)
		}
		models := make([]bucketModel, len(names))
		var trace []string
		fail := func(format string, args ...any) {
			t.Fatalf("%s\nbucket rate=%v/s burst=%v%s; the calls so far, with Redis's clock (µs after the first call) around each:\n  %s",
				fmt.Sprintf(format, args...), c.rate, c.burst, e.startNote(c.start), strings.Join(trace, "\n  "))
		}
		var t0 int64
		for si, st := range c.steps {
			if st.pause > 0 {
				e.advance(st.pause)
				trace = append(trace, fmt.Sprintf("pause %v", st.pause))
			}
			keys := make([]string, len(st.calls))
			ns := make([]float64, len(st.calls))
			for i, call := range st.calls {
				keys[i] = names[call.key]
				ns[i] = call.n
				if call.rest {
					// About what the bucket holds now, if it was used.
					m := models[call.key]
					held := c.burst
					if m.seen {
						held = math.Min(c.burst, m.lo+st.pause.Seconds()*c.rate)
					}
					ns[i] = math.Max(c.burst*1e-4, math.Min(c.burst, held+call.n*c.burst))
				}
			}
			calls, err := timedCalls(ctx, e.rdb, sha, c.rate, c.burst, keys, ns)
			if err != nil {
				fail("step %d: MULTI/EXEC of %d calls failed: %v", si+1, len(keys), err)
			}
			if si == 0 {
				t0 = calls[0].from
			}
			for i, tc := range calls {
				k := st.calls[i].key
				m := &models[k]
				m.advance(c.rate, c.burst, tc.from, tc.to)
				desc := fmt.Sprintf("[%d, %d] key %d: EVAL(rate=%v, burst=%v, n=%v) = %s",
					tc.from-t0, tc.to-t0, k, c.rate, c.burst, tc.n, tc.answer())
				trace = append(trace, desc)
				if tc.err != nil {
					fail("EVAL tokenbucket.lua failed: %v", tc.err)
				}
				if msg := judgeCall(c.rate, c.burst, m, tc); msg != "" {
					fail("%s", msg)
				}
				if msg := judgeTTL(c.rate, c.burst, m, tc); msg != "" {
					fail("%s", msg)
				}
			}
		}
	})
}

// startNote says where miniredis's clock started, for messages.
func (e *env) startNote(start time.Time) string {
	if !e.fake() {
		return " on a real Redis"
	}
	return fmt.Sprintf(", miniredis's clock starting at %s (TIME %d %d)", start.Format(time.RFC3339Nano), start.Unix(), start.Nanosecond()/1000)
}

// answer formats what a call returned.
func (tc timedCall) answer() string {
	if tc.err != nil {
		return "error"
	}
	return fmt.Sprintf("(%v, %s), then PTTL %v", tc.ok, fmtWait(tc.wait), tc.pttl)
}

// judgeCall checks one answer against the bounds of m (advanced to the
// call) and applies it to them. It returns what is wrong, or "".
func judgeCall(rate, burst float64, m *bucketModel, tc timedCall) string {
	n := tc.n
	if n > burst {
		if tc.ok || tc.wait != lab.InfDuration {
			return fmt.Sprintf("n=%v is more than burst=%v: want a refusal with the wait \"never\" (-1), not %s", n, burst, tc.answer())
		}
		return ""
	}
	slack := modelTolerance * math.Max(1, burst)
	mustAdmit := m.lo-slack >= n
	mustRefuse := m.hi+slack < n
	if tc.ok {
		if mustRefuse {
			return fmt.Sprintf("admitted n=%v, but by Redis's clock the bucket held at most %.9g tokens: "+
				"the refill or the takes are wrong (or the key expired before its bucket was full again)", n, m.hi)
		}
		if tc.wait != 0 {
			return fmt.Sprintf("admitted with wait %v; want wait 0 with every admission", tc.wait)
		}
		m.lo, m.hi = math.Max(0, m.lo-n), math.Max(0, m.hi-n)
		return ""
	}
	if mustAdmit {
		return fmt.Sprintf("refused n=%v, but by Redis's clock the bucket held at least %.9g tokens: "+
			"a refusal must mean the tokens are not there (or the script lost what dripped in)", n, m.lo)
	}
	if tc.wait == lab.InfDuration {
		return fmt.Sprintf("refused n=%v ≤ burst=%v with the wait \"never\"; want the finite wait until n tokens are there", n, burst)
	}
	least := time.Duration(math.Max(0, (n-m.hi)/rate*1e9))
	most := time.Duration(math.Max(0, (n-m.lo)/rate*1e9)) + time.Millisecond
	switch {
	case tc.wait < least-2*time.Nanosecond:
		return fmt.Sprintf("refused n=%v with wait %v; want at least %v = (n − %.9g tokens at most)/rate by Redis's clock: "+
			"never round a wait down, and keep every microsecond of Redis's time (a number turned into text with tostring keeps only 14 digits)",
			n, tc.wait, least, m.hi)
	case tc.wait > most+2*time.Nanosecond:
		return fmt.Sprintf("refused n=%v with wait %v; want at most %v = (n − %.9g tokens at least)/rate, rounded up by at most 1ms",
			n, tc.wait, most, m.lo)
	}
	return ""
}

// judgeTTL checks the key's PTTL after an admitted call: it must have an
// expiry of at least the time the bucket needs to refill to full (less the
// time that passed before PTTL read it) and at most the time from empty to
// full plus a second.
func judgeTTL(rate, burst float64, m *bucketModel, tc timedCall) string {
	if !tc.ok {
		return ""
	}
	most := time.Duration(burst/rate*float64(time.Second)) + expiryMargin + time.Millisecond
	least := time.Duration((burst-m.hi)/rate*float64(time.Second)) -
		time.Duration(tc.pttlUntil-tc.from)*time.Microsecond - time.Millisecond
	switch {
	case tc.pttl == -2*time.Nanosecond || tc.pttl == -2:
		return fmt.Sprintf("after an admission, key %s does not exist: keep the bucket in KEYS[1]", tc.key)
	case tc.pttl < 0:
		return fmt.Sprintf("after an admission, key %s has no expiry (PTTL %v): set one on every take, the refill time plus at most %v, "+
			"or Redis keeps a key for every client ever seen", tc.key, tc.pttl, expiryMargin)
	case tc.pttl < least:
		return fmt.Sprintf("after an admission, key %s expires in %v; want at least %v, the time the bucket needs to refill to full: "+
			"a key that expires earlier comes back as a full bucket", tc.key, tc.pttl, least)
	case tc.pttl > most:
		return fmt.Sprintf("after an admission, key %s expires in %v; want at most %v, the time from empty to full (burst/rate) plus %v",
			tc.key, tc.pttl, most, expiryMargin)
	}
	return ""
}

// --- Keyspace: many keys, their state kept, their memory bounded ---

func (s *suite) keyspace(e *env) {
	// The bucket takes long to refill, so that on a real Redis, where
	// every call takes time, no bucket refills much while the check runs;
	// the expiry is then many seconds, and whether idle keys go away is
	// judged on miniredis (and by the floods on a real server).
	refill := time.Duration(5+e.rng.IntN(15)) * time.Second
	burst := float64(1 + e.rng.IntN(9))
	if e.rng.IntN(2) == 0 {
		burst += math.Round(e.rng.Float64()*100) / 100
	}
	rate := burst / refill.Seconds()
	keys := 150 + e.rng.IntN(650) // how many: no fixed threshold passes
	e.attempts(func() { e.manyKeys(rate, burst, refill, keys) })
}

// manyKeys is one attempt of the Keyspace check.
func (e *env) manyKeys(rate, burst float64, refill time.Duration, keys int) {
	ctx := context.Background()
	before := e.keyspaceNow()
	x := e.limiter(rate, burst, nil)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	// Every key is drained, in order, from 8 goroutines.
	if msg := parallelTakes(x, names, func(string) float64 { return burst }, true); msg != "" {
		e.t.Fatalf("%d keys at rate=%v/s burst=%v: %s", keys, rate, burst, msg)
	}
	// Every bucket is still empty: none may have been reset to full.
	asks := make(map[string]float64, len(names))
	for _, name := range names {
		asks[name] = burst * (0.5 + e.rng.Float64()/2)
	}
	if msg := parallelTakes(x, names, func(name string) float64 { return asks[name] }, false); msg != "" {
		e.t.Fatalf("%d keys at rate=%v/s burst=%v, each drained and then asked again for more than half the burst: %s\n"+
			"a bucket must keep its state however many other keys there are: no sweep, reset or limit that drops buckets which are not full again",
			keys, rate, burst, msg)
	}
	// Redis holds one key per bucket, each with an expiry that outlives the
	// refill and not much more.
	after := e.keyspaceNow()
	want := make(map[string]bool, len(names))
	for _, name := range names {
		want[e.redisName(name)] = true
	}
	var extra []string
	for key := range after {
		if !before[key] && !want[key] {
			extra = append(extra, key)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		e.t.Fatalf("after takes on %d keys, Redis holds %d other keys, such as %q; want only the buckets' keys (KEYS[1]): "+
			"a key written per request or per client besides the bucket grows with the traffic", keys, len(extra), extra[:min(3, len(extra))])
	}
	most := refill + expiryMargin + time.Millisecond
	least := refill - refill/10 // every bucket was drained within the last few seconds at most
	var missing int
	for _, name := range names {
		key := e.redisName(name)
		if !after[key] {
			missing++
			continue
		}
		pttl, err := e.rdb.PTTL(ctx, key).Result()
		if err != nil {
			e.t.Fatalf("PTTL %s: %v", key, err)
		}
		switch {
		case pttl < 0:
			e.t.Fatalf("key %s of a drained bucket has no expiry (PTTL %v) after takes on %d keys; want the refill time (%v) plus at most %v",
				key, pttl, keys, refill, expiryMargin)
		case pttl < least && e.fake():
			e.t.Fatalf("key %s of a drained bucket expires in %v; want at least %v, the time it needs to refill", key, pttl, refill)
		case pttl > most:
			e.t.Fatalf("key %s expires in %v; want at most %v: empty to full (%v) plus at most %v", key, pttl, most, refill, expiryMargin)
		}
	}
	if missing > 0 {
		e.t.Fatalf("%d of %d drained buckets have no key in Redis (as %s…); want one key per bucket, named as the limiter names it",
			missing, keys, e.redisName(names[0]))
	}
	if !e.fake() {
		return
	}
	// Idle for longer than any allowed expiry: every key is gone.
	e.advance(most)
	left := 0
	for key := range e.keyspaceNow() {
		if !before[key] {
			left++
		}
	}
	if left > 0 {
		e.t.Fatalf("%v after the last take, %d of %d keys are still in Redis; want none: each must expire once its bucket is full again",
			most, left, keys)
	}
}

// redisName is the Redis key of the limiter's bucket for a check's key
// name: the limiter puts its prefix in front.
func (e *env) redisName(name string) string { return "ratelab:bucket:" + e.key(name) }

// keyspaceNow returns every key in the server (SCAN).
func (e *env) keyspaceNow() map[string]bool {
	e.t.Helper()
	ctx := context.Background()
	keys := map[string]bool{}
	iter := e.rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		keys[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		e.t.Fatalf("SCAN: %v", err)
	}
	return keys
}

// parallelTakes asks for n(name) tokens of every key from 8 goroutines, and
// returns what went wrong unless every answer is ok (admitted or refused,
// as wantOK says) and came from Redis.
func parallelTakes(x *lim, names []string, n func(string) float64, wantOK bool) string {
	var (
		mu    sync.Mutex
		wrong string
		next  int
	)
	suitekit.Hammer(x.e.t, 8, "TryTakeCtx", func(int) {
		for {
			mu.Lock()
			if next == len(names) || wrong != "" {
				mu.Unlock()
				return
			}
			name := names[next]
			next++
			mu.Unlock()
			ok, wait, err := x.l.TryTakeCtx(context.Background(), x.e.key(name), n(name))
			var msg string
			switch {
			case err != nil && timedOut(err):
				msg = undecidedMark + fmt.Sprintf("TryTakeCtx(%q, %v) did not get an answer from Redis in time: %v", x.e.key(name), n(name), err)
			case err != nil:
				msg = errReport(fmt.Sprintf("TryTakeCtx(%q, %v)", x.e.key(name), n(name)), err)
			case ok != wantOK:
				msg = fmt.Sprintf("TryTakeCtx(%q, %v) = (%v, %v, nil); want ok = %v", x.e.key(name), n(name), ok, fmtWait(wait), wantOK)
			case ok && wait != 0:
				msg = fmt.Sprintf("TryTakeCtx(%q, %v) = (true, %v, nil); want wait 0 with every admission", x.e.key(name), n(name), fmtWait(wait))
			}
			if msg != "" {
				mu.Lock()
				if wrong == "" {
					wrong = msg
				}
				mu.Unlock()
			}
		}
	})
	if why, ok := strings.CutPrefix(wrong, undecidedMark); ok {
		panic(inconclusive{why}) // a busy machine: attempts starts again
	}
	return wrong
}

// undecidedMark starts what parallelTakes reports when Redis did not answer
// in time.
const undecidedMark = "undecided: "
