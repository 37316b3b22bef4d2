package bucketsuite

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// --- The randomized differential test ---

// taker is one limiter under test: for a Bucket the key is ignored.
type taker func(key string, n float64) (ok bool, wait time.Duration)

// differential drives fresh limiters from open through random sequences of
// sleeps and TryTake calls, and checks every answer against model, an exact
// token bucket per key. Everything is drawn from the run's seed: the rate
// and burst of each limiter, the instant it starts, its keys (up to 40 for
// a keyed limiter), the sizes and the sleeps. A limiter that is almost
// right, say one that drops elapsed time on a denial or rounds waits down,
// diverges within a few steps.
func differential(t *testing.T, keyed bool, open func(rate, burst float64) taker) {
	t.Helper()
	rng := suitekit.Rand(t)
	sequences, steps := 200, 40
	if keyed {
		sequences, steps = 80, 100
	}
	for seq := range sequences {
		rate, burst := randomRate(rng), randomBurst(rng)
		if rng.IntN(3) == 0 { // the ends of the domain: 0, subnormal, huge
			rate, burst = suitekit.ExtremeRateAndSize(rng)
		}
		keys := []string{""}
		if keyed {
			keys = suitekit.RandomKeys(rng, 1+rng.IntN(40))
		}
		time.Sleep(randomOffset(rng)) // each limiter starts at its own instant
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
			if keyed {
				call = fmt.Sprintf("TryTake(%s, %v)", suitekit.QuoteKey(key), n)
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
			wantOK, wantWait, margin, x := m.try(now, n)
			switch {
			case exact && !ok:
				fail("(true, 0s)", "the previous call was refused with the same n, and since then exactly the wait it gave has passed: "+retryAdvice(sleep, wait))
			case margin <= tokenSlack(burst):
				// The bucket holds n tokens to within float rounding:
				// either answer is fine, as long as it is consistent.
				if ok && wait != 0 {
					fail("(true, 0s)", "a successful call waits 0")
				}
				// (Compared as floats: at a tiny rate the bound passes any Duration.)
				if lim := 1 + math.Ceil(tokenSlack(burst)/rate*1e9); !ok && wait != wantWait && float64(wait) > lim {
					fail(fmt.Sprintf("(%v, %v)", wantOK, wantWait), "the bucket holds n tokens to within rounding")
				}
			case !ok && !wantOK && wait == lab.InfDuration && m.pastDuration(now, wantWait):
				// The instant the wait promises lies more than a Duration
				// (about 292 years) after the bucket last changed, where
				// time.Time.Sub stops counting: no limiter that keeps
				// "tokens as of last" can promise that retry, so it may
				// also call the wait endless.
			case ok != wantOK || !waitOK(wait, wantWait, x, rate, burst):
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

// randomRate returns a refill rate in tokens per second: one of a few round
// ones, a ratio of small integers (1/3 of a token per second, say, whose
// waits never come out even), or any rate from 0.001 to 100,000 spread
// evenly over its orders of magnitude.
func randomRate(rng *rand.Rand) float64 {
	switch rng.IntN(6) {
	case 0:
		return []float64{0.5, 1, 2.5, 3, 7, 10, 60, 1000}[rng.IntN(8)]
	case 1:
		return float64(1+rng.IntN(30)) / float64(3+rng.IntN(9))
	default:
		return math.Pow(10, -3+8*rng.Float64())
	}
}

// randomBurst returns a bucket's capacity in tokens: a whole number up to
// 20, a half, or any from 0.25 to 1000 spread over its orders of magnitude.
func randomBurst(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		return float64(1 + rng.IntN(20))
	case 1:
		return float64(rng.IntN(20)) + 0.5
	default:
		return math.Pow(10, -0.6+3.6*rng.Float64())
	}
}

// randomOffset returns a random stretch of fake time, up to about a year,
// with a random fraction of a second.
func randomOffset(rng *rand.Rand) time.Duration {
	return time.Duration(rng.Int64N(int64(365 * 24 * time.Hour)))
}

// randomN returns a request size: mostly 1, sometimes fractions, the whole
// burst, more than the burst, 0, a negative one, or any real number up to
// the burst.
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
	case r < 72:
		return 0
	case r < 74:
		return -burst * rng.Float64()
	default:
		return rng.Float64() * burst
	}
}

// randomSleep returns how long to sleep before a call: often nothing, often
// a fraction of the time to refill, sometimes long enough to fill up.
func randomSleep(rng *rand.Rand, rate, burst float64) time.Duration {
	fill := boundedNs(burst / rate * 1e9) // empty to full
	token := boundedNs(1e9 / rate)
	switch r := rng.IntN(100); {
	case r < 30:
		return 0
	case r < 40:
		return time.Duration(rng.Int64N(1000)) // under a microsecond
	case r < 60:
		return time.Duration(rng.Int64N(int64(token) + 1)) // up to one token
	case r < 90:
		return time.Duration(rng.Int64N(int64(2*fill) + 1))
	default:
		return time.Hour
	}
}

// boundedNs is ns nanoseconds, within [0, 1000 h]: an infinite or NaN ns
// (a rate of 0, say) is 1000 h.
func boundedNs(ns float64) time.Duration {
	if !(ns < float64(1000*time.Hour)) {
		return 1000 * time.Hour
	}
	return time.Duration(max(ns, 0))
}

// tokenSlack is how far floating-point arithmetic may leave a bucket's
// tokens from the exact count before an answer counts as a coin toss: far
// below anything a test measures, far above the rounding of a few float64
// operations on numbers up to burst.
func tokenSlack(burst float64) float64 { return 1e-9 * math.Max(1, burst) }

// waitBounds returns the least and the most a wait may be when the exact
// wait is x nanoseconds: ⌈x⌉, less only by what float64 rounding of the
// tokens (about 1e-13 of the burst, δ ns at this rate) can explain, and more
// by at most a nanosecond besides: [⌈x − δ⌉, ⌈x + δ⌉ + 1]. A wait rounded
// down, truncated to the microsecond or worked out from the wrong instant
// falls outside.
func waitBounds(x *big.Rat, rate, burst float64) (lo, hi time.Duration) {
	d := 1e-13 * math.Max(1, burst) / rate * 1e9
	if !(d < 1e300) { // a huge burst at a tiny rate: any wait is within rounding
		d = 1e300
	}
	delta := new(big.Rat).SetFloat64(d)
	ceil := func(r *big.Rat) time.Duration {
		q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
		if rem.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		if !q.IsInt64() {
			return lab.InfDuration
		}
		return time.Duration(q.Int64())
	}
	lo = ceil(new(big.Rat).Sub(x, delta))
	hi = ceil(new(big.Rat).Add(x, delta))
	if hi < lab.InfDuration {
		hi++
	}
	return lo, hi
}

// waitOK reports whether got is an acceptable answer when the exact wait is
// want, x ns before rounding: equal for 0 and lab.InfDuration, otherwise
// within waitBounds (lab.InfDuration too when the bounds reach it).
func waitOK(got, want time.Duration, x *big.Rat, rate, burst float64) bool {
	if want == 0 || want == lab.InfDuration {
		return got == want
	}
	lo, hi := waitBounds(x, rate, burst)
	return got >= lo && (got <= hi || hi == lab.InfDuration)
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

// try returns the exact answer to TryTake(n) at now, margin, how far the
// tokens held are from n (+Inf when that does not matter), and for a finite
// wait x, the wait in nanoseconds before rounding up.
func (m *model) try(now time.Duration, n float64) (ok bool, wait time.Duration, margin float64, x *big.Rat) {
	switch {
	case n <= 0:
		return true, 0, math.Inf(1), nil
	case !(n <= bigFloat(&m.burst)):
		return false, lab.InfDuration, math.Inf(1), nil
	}
	diff := m.at(now)
	diff.Sub(diff, new(big.Rat).SetFloat64(n)) // tokens − n
	margin = math.Abs(bigFloat(diff))
	if diff.Sign() >= 0 {
		return true, 0, margin, nil
	}
	if m.rate.Sign() == 0 {
		return false, lab.InfDuration, margin, nil // never refills
	}
	// wait = ⌈(n − tokens) × 1e9 / rate⌉ ns
	x = diff.Neg(diff)
	x.Mul(x, big.NewRat(1e9, 1))
	x.Quo(x, &m.rate)
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return false, lab.InfDuration, margin, nil
	}
	return false, time.Duration(q.Int64()), margin, x
}

// pastDuration reports whether now+wait lies further after the model's last
// change than a Duration reaches.
func (m *model) pastDuration(now, wait time.Duration) bool {
	return wait > lab.InfDuration-(now-m.last)
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
