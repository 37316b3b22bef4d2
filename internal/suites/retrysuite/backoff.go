package retrysuite

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// --- BackoffDelay: the model and the inputs ---

// ceilingOf is the model of BackoffDelay's ceiling: min(cap, base×2^attempt),
// a negative attempt, base or cap counting as 0, worked out exactly in
// integers of any size, so it never overflows.
func ceilingOf(attempt int, base, cap time.Duration) time.Duration {
	attempt, base, cap = max(attempt, 0), max(base, 0), max(cap, 0)
	if base == 0 {
		return 0
	}
	if attempt > 64 { // base×2^attempt ≥ 2^65, above every Duration
		return cap
	}
	x := new(big.Int).Lsh(big.NewInt(int64(base)), uint(attempt))
	if x.Cmp(big.NewInt(int64(cap))) > 0 {
		return cap
	}
	return time.Duration(x.Int64())
}

// drawAttempt draws an attempt number: small ones mostly, negative and
// huge ones too.
func drawAttempt(rt *rapid.T, label string) int {
	return rapid.OneOf(
		rapid.IntRange(-3, 70),
		rapid.IntRange(0, 40),
		rapid.SampledFrom([]int{math.MinInt, -1 << 40, 61, 62, 63, 64, 65, 1 << 31, 1 << 40, math.MaxInt}),
		rapid.Int(),
	).Draw(rt, label)
}

// drawSpan draws a base or a cap from every scale a Duration has: zero and
// negative, nanoseconds, seconds, centuries, and the largest Durations.
func drawSpan(rt *rapid.T, label string) time.Duration {
	return time.Duration(rapid.OneOf(
		rapid.Int64Range(-int64(time.Hour), 0),
		rapid.Int64Range(1, 1000),
		rapid.Int64Range(1000, int64(10*time.Second)),
		rapid.Int64Range(int64(10*time.Second), int64(1000*time.Hour)),
		rapid.Int64Range(int64(1000*time.Hour), math.MaxInt64),
		rapid.SampledFrom([]int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 / 3, math.MinInt64}),
	).Draw(rt, label))
}

// bitLen is the number of bits of d > 0.
func bitLen(d time.Duration) int { return big.NewInt(int64(d)).BitLen() }

// delayOf calls BackoffDelay and returns its result, or a description of
// its panic.
func (s *suite) delayOf(attempt int, base, cap time.Duration, jitter bool) (time.Duration, string) {
	var d time.Duration
	if r, stack := suitekit.Catch(func() { d = s.impl.BackoffDelay(attempt, base, cap, jitter) }); r != nil {
		return 0, suitekit.PanicReport(fmt.Sprintf("BackoffDelay(%d, %v, %v, %v)", attempt, base, cap, jitter), r, stack)
	}
	return d, ""
}

// backoffAgrees checks BackoffDelay(attempt, base, cap, ·) against the model:
// the ceiling itself without jitter, a value in [0, ceiling] with it.
func (s *suite) backoffAgrees(attempt int, base, cap time.Duration, why string) string {
	want := ceilingOf(attempt, base, cap)
	got, failure := s.delayOf(attempt, base, cap, false)
	if failure != "" {
		return failure
	}
	if got != want {
		return fmt.Sprintf("BackoffDelay(%d, %v, %v, false) = %v; want %v\n%s", attempt, base, cap, got, want, why)
	}
	for range 8 {
		got, failure := s.delayOf(attempt, base, cap, true)
		if failure != "" {
			return failure
		}
		if got < 0 || got > want {
			return fmt.Sprintf("BackoffDelay(%d, %v, %v, true) = %v; want a value in [0, %v]\n%s", attempt, base, cap, got, want, why)
		}
	}
	return ""
}

// bothClocks runs the property f in synctest bubbles and on the real
// clock: a pure function must not care which.
func bothClocks(t *testing.T, f func(rt *rapid.T) string) {
	suitekit.Property(t, func(rt *rapid.T, _ *testing.T) string { return f(rt) })
	suitekit.PropertyOutside(t, f)
}

// --- BackoffDelay: the checks ---

// backoffBounds compares BackoffDelay with the model for attempts, bases
// and caps drawn at random from every scale, inside bubbles and outside,
// after a few fixed cases that say what is meant.
func (s *suite) backoffBounds(t *testing.T) {
	const inf = lab.InfDuration
	for _, tt := range []struct {
		attempt   int
		base, cap time.Duration
		why       string
	}{
		{0, time.Second, 10 * time.Second, "attempt 0 waits base"},
		{3, 250 * time.Millisecond, 10 * time.Second, "250ms × 2^3"},
		{0, 0, 5 * time.Second, "a base of 0 never waits"},
		{-1, 100 * time.Millisecond, 5 * time.Second, "a negative attempt counts as 0"},
		{2, -time.Second, 5 * time.Second, "a negative base counts as 0"},
		{2, time.Second, -time.Second, "a negative cap counts as 0"},
		{34, time.Second, inf, "2^34 s is 544 years: past the largest Duration"},
	} {
		if msg := s.backoffAgrees(tt.attempt, tt.base, tt.cap, tt.why); msg != "" {
			t.Fatal(msg)
		}
	}
	bothClocks(t, func(rt *rapid.T) string {
		if rapid.IntRange(0, 2).Draw(rt, "precision case") == 0 {
			// A base of more significant bits than a float64 holds, doubled
			// while it still fits below the cap: exact integers only.
			base := time.Duration(rapid.Int64Range(1<<53+1, 1<<61).Draw(rt, "base"))
			attempt := rapid.IntRange(0, 62-bitLen(base)).Draw(rt, "attempt")
			cap := time.Duration(rapid.OneOf(rapid.Int64Range(int64(base)<<attempt, math.MaxInt64), rapid.Just(int64(math.MaxInt64))).Draw(rt, "cap"))
			return s.backoffAgrees(attempt, base, cap, "base×2^attempt, exactly: a float64 holds 53 bits")
		}
		attempt := drawAttempt(rt, "attempt")
		base, cap := drawSpan(rt, "base"), drawSpan(rt, "cap")
		return s.backoffAgrees(attempt, base, cap, "the ceiling is min(cap, base×2^attempt), a negative attempt, base or cap counting as 0; "+
			"without jitter the delay is the ceiling, with it a value in [0, ceiling]")
	})
}

// backoffCap checks, for random bases and caps, that the delay doubles up
// to the cap, reaches it at the first attempt where base×2^attempt passes
// it, and stays there for every later attempt, however large.
func (s *suite) backoffCap(t *testing.T) {
	bothClocks(t, func(rt *rapid.T) string {
		base := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(rt, "base"))
		cap := time.Duration(rapid.Int64Range(int64(base), math.MaxInt64).Draw(rt, "cap"))
		first := 0 // the first attempt whose doubling reaches the cap
		for ceilingOf(first, base, cap) < cap {
			first++
		}
		why := fmt.Sprintf("with base %v and cap %v the doubling reaches the cap at attempt %d and stays there", base, cap, first)
		if first > 0 {
			if msg := s.backoffAgrees(first-1, base, cap, why); msg != "" {
				return msg
			}
		}
		later := rapid.OneOf(rapid.IntRange(first, first+70), rapid.IntRange(first, math.MaxInt)).Draw(rt, "later")
		for _, a := range []int{first, later} {
			got, failure := s.delayOf(a, base, cap, false)
			if failure != "" {
				return failure
			}
			if got != cap {
				return fmt.Sprintf("BackoffDelay(%d, %v, %v, false) = %v; want the cap, %v\n%s", a, base, cap, got, cap, why)
			}
		}
		return ""
	})
	// A base above the cap is capped too.
	if msg := s.backoffAgrees(0, 10*time.Second, time.Second, "a base above the cap is capped at once"); msg != "" {
		t.Fatal(msg)
	}
}

// backoffNoOverflow draws only the inputs where base×2^attempt overflows a
// Duration: the delay must saturate at the cap, never wrap round.
func (s *suite) backoffNoOverflow(t *testing.T) {
	bothClocks(t, func(rt *rapid.T) string {
		// Mostly attempts below 63 with a base just large enough for
		// base×2^attempt to overflow, where a product wraps round.
		attempt := rapid.OneOf(rapid.IntRange(1, 62), rapid.IntRange(1, 62), rapid.IntRange(63, math.MaxInt)).Draw(rt, "attempt")
		// A base of b bits gives a product of b+attempt bits: past 64, a
		// product that wraps round keeps its low 64 bits, half the time
		// positive.
		var base time.Duration
		if attempt < 63 {
			bits := min(64-attempt+rapid.IntRange(0, 6).Draw(rt, "bits past 64"), 63)
			lo := int64(1) << (bits - 1)
			base = time.Duration(lo + rapid.Int64Range(0, lo-1+lo*int64(bits/63)).Draw(rt, "base's lower bits"))
		} else {
			base = time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(rt, "base"))
		}
		cap := time.Duration(rapid.OneOf(
			rapid.Int64Range(int64(time.Second), math.MaxInt64),
			rapid.Int64Range(math.MaxInt64/2, math.MaxInt64),
			rapid.Just(int64(lab.InfDuration)),
		).Draw(rt, "cap"))
		return s.backoffAgrees(attempt, base, cap, "base×2^attempt saturates at the cap: it must not overflow and wrap round")
	})
}

// jitterAlpha is the chance that one uniformity test fails a correct
// BackoffDelay. FullJitterIsUniform and BackoffConcurrent run eight such
// tests, so a correct package fails one of them in fewer than one run in
// 10^8.
const jitterAlpha = 1e-9

// jitterSamples is the number of delays each uniformity test draws. With
// jitterAlpha the Kolmogorov–Smirnov distance may reach 0.052 by chance;
// "equal jitter" (ceiling/2 + rand(ceiling/2)) is at 0.5, no jitter at 1,
// jitter before the cap near 1 at the cap, and a draw that misses a tenth
// of the range at 0.1.
const jitterSamples = 4000

// jitterCase is one ceiling the uniformity test draws delays below.
type jitterCase struct {
	attempt   int
	base, cap time.Duration
}

func (c jitterCase) String() string {
	return fmt.Sprintf("BackoffDelay(%d, %v, %v, true)", c.attempt, c.base, c.cap)
}

// drawJitterCase draws a ceiling of the given scale (0: 10µs to 1ms, 1:
// 1ms to 1s, 2: 1s to an hour, drawn log-uniformly), below the cap when
// atCap is false (base×2^attempt) and at it when atCap is true (the
// doubling has passed the cap, so the ceiling is the cap).
func drawJitterCase(r *rand.Rand, scale int, atCap bool) jitterCase {
	lo := []float64{1e4, 1e6, 1e9}[scale]
	ceiling := time.Duration(lo * math.Pow(1000, r.Float64()) * []float64{1, 1, 3.6}[scale])
	attempt := r.IntN(8)
	if atCap {
		// The cap is the ceiling; base×2^attempt is past it.
		base := time.Duration(float64(ceiling) * (1 + r.Float64()) / float64(int64(1)<<attempt))
		return jitterCase{attempt + 1, max(base, 1), ceiling}
	}
	base := max(ceiling>>attempt, 1)
	cap := base<<attempt + time.Duration(r.Int64N(int64(base<<attempt)+1))
	if r.IntN(4) == 0 {
		cap = lab.InfDuration
	}
	return jitterCase{attempt, base, cap}
}

// uniformity draws jitterSamples delays of c (by draw, which may call from
// many goroutines) and returns what is wrong with them, if anything.
func uniformity(c jitterCase, where string, samples []time.Duration) string {
	ceiling := ceilingOf(c.attempt, c.base, c.cap)
	xs := make([]float64, len(samples))
	for i, d := range samples {
		if d < 0 || d > ceiling {
			return fmt.Sprintf("%s = %v; want a value in [0, %v] (%s)", c, d, ceiling, where)
		}
		xs[i] = float64(d) / float64(ceiling)
	}
	d, critical := suitekit.KSUniform(xs, jitterAlpha)
	critical += 1 / float64(ceiling+1) // whole nanoseconds
	if d <= critical {
		return ""
	}
	var quarters [4]int
	for _, x := range xs {
		quarters[min(int(4*x), 3)]++
	}
	var fracs []string
	for _, q := range quarters {
		fracs = append(fracs, fmt.Sprintf("%.1f%%", 100*float64(q)/float64(len(xs))))
	}
	return fmt.Sprintf("%s (%s): %d delays are not uniform on [0, %v]: the four quarters of the range got %s, "+
		"and the largest distance between their distribution and the uniform one is %.3f; "+
		"a uniform draw exceeds %.3f with a chance of 1 in %.0g\n"+
		"full jitter is uniform on [0, ceiling]: work out the ceiling min(cap, base×2^attempt) first, then draw "+
		"with math/rand/v2 (rand.N), fresh for every call",
		c, where, len(xs), ceiling, strings.Join(fracs, ", "), d, critical, 1/jitterAlpha)
}

// fullJitterIsUniform draws delays for ceilings chosen at random below
// the cap and at it, and compares them with the uniform distribution on
// [0, ceiling] by a Kolmogorov–Smirnov test whose threshold is worked out
// for a stated chance of failing correct code (jitterAlpha). Half the
// ceilings are tested on the real clock and half inside a bubble, where
// every delay is drawn at the same fake instant: a generator seeded from
// the clock gives the same delay every time there.
func (s *suite) fullJitterIsUniform(t *testing.T) {
	r := suitekit.Rand(t)
	// Every scale below the cap and at it, in a random order, half of
	// them on the real clock and half in a bubble.
	var cases []jitterCase
	for _, scale := range r.Perm(3) {
		cases = append(cases, drawJitterCase(r, scale, false), drawJitterCase(r, scale, true))
	}
	r.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	draw := func(c jitterCase) ([]time.Duration, string) {
		out := make([]time.Duration, jitterSamples)
		for i := range out {
			d, failure := s.delayOf(c.attempt, c.base, c.cap, true)
			if failure != "" {
				return nil, failure
			}
			out[i] = d
		}
		return out, ""
	}
	for _, c := range cases[:3] {
		samples, failure := draw(c)
		if failure == "" {
			failure = uniformity(c, "on the real clock", samples)
		}
		if failure != "" {
			t.Fatal(failure)
		}
	}
	suitekit.Bubble(t, func(t *testing.T) {
		for _, c := range cases[3:] {
			samples, failure := draw(c)
			if failure == "" {
				failure = uniformity(c, "all drawn at one instant of a synctest bubble's fake clock", samples)
			}
			if failure != "" {
				t.Fatal(failure)
			}
		}
	})
}

// backoffConcurrent draws jittered delays from many goroutines at once,
// on the real clock: BackoffDelay is safe for concurrent use (a shared
// *rand.Rand without a lock is a data race, which -race reports), and the
// delays drawn together are still uniform.
func (s *suite) backoffConcurrent(t *testing.T) {
	r := suitekit.Rand(t)
	for _, atCap := range []bool{false, true} {
		c := drawJitterCase(r, r.IntN(3), atCap)
		goroutines := 4 + r.IntN(13)
		each := jitterSamples/goroutines + 1
		var (
			mu      sync.Mutex
			samples []time.Duration
		)
		suitekit.Hammer(t, goroutines, "BackoffDelay", func(int) {
			mine := make([]time.Duration, each)
			for i := range mine {
				mine[i] = s.impl.BackoffDelay(c.attempt, c.base, c.cap, true)
			}
			mu.Lock()
			samples = append(samples, mine...)
			mu.Unlock()
		})
		if msg := uniformity(c, fmt.Sprintf("drawn by %d goroutines at once", goroutines), samples); msg != "" {
			t.Fatal(msg)
		}
	}
}
