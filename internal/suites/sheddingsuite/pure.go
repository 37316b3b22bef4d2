package sheddingsuite

import (
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"

	"ratelab/fakegpu"
	"ratelab/internal/suites/suitekit"
	"ratelab/lab"
)

// The pure functions run on the real clock, outside any bubble: they have no
// business looking at the time. A few fixed cases document the intent; the
// properties after them draw new inputs on every run (from the run's seed)
// and compare each answer with exact integer arithmetic.

func testRetryAfterSeconds(t *testing.T, impl Impl) {
	suitekit.NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		d := durationGen().Draw(rt, "d")
		var got int
		if msg := suitekit.Report(fmt.Sprintf("RetryAfterSeconds(%v)", d), func() { got = impl.RetryAfterSeconds(d) }); msg != "" {
			rt.Fatal(msg)
		}
		if want := ceilSeconds(d); got != want {
			rt.Fatalf("RetryAfterSeconds(%v) = %d; want %d (%d ns: whole seconds rounded up, never below 1, "+
				"with no overflow and no floating point on the way)", d, got, want, int64(d))
		}
	})
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 1},
		{-time.Second, 1},
		{time.Nanosecond, 1},
		{300 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{2500 * time.Millisecond, 3},
		{3 * time.Second, 3},
		// The largest Duration is 9223372036.854775807 s: rounding it up
		// must not overflow.
		{lab.InfDuration, 9223372037},
	}
	for _, tt := range tests {
		var got int
		guard(t, "RetryAfterSeconds", func() { got = impl.RetryAfterSeconds(tt.d) })
		if got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d; want %d (whole seconds rounded up, never below 1)", tt.d, got, tt.want)
		}
	}
}

// durationGen draws waits of every kind a Retry-After meets: fractions of a
// second, whole seconds and a nanosecond either side, huge waits up to
// lab.InfDuration, zero and negative ones, and any int64 at all.
func durationGen() *rapid.Generator[time.Duration] {
	return rapid.Custom(func(t *rapid.T) time.Duration {
		const maxS = int64(lab.InfDuration / time.Second)
		switch rapid.IntRange(0, 6).Draw(t, "kind") {
		case 0: // a few seconds and a fraction
			return time.Duration(rapid.Int64Range(0, 100).Draw(t, "s"))*time.Second +
				time.Duration(spread(t, 0, int64(time.Second)-1, "ns"))
		case 1: // whole seconds, or a nanosecond or two either side
			return time.Duration(spread(t, 0, maxS, "s"))*time.Second + time.Duration(rapid.Int64Range(-2, 2).Draw(t, "ns"))
		case 2: // near the largest Duration
			return lab.InfDuration - time.Duration(spread(t, 0, 3*int64(time.Second), "below"))
		case 3: // negative
			return -time.Duration(spread(t, 0, math.MaxInt64, "neg"))
		case 4: // huge, with a fraction that floating point loses
			return time.Duration(spread(t, 1<<23, maxS-1, "s"))*time.Second + time.Duration(rapid.Int64Range(1, 999).Draw(t, "ns"))
		case 5:
			return time.Duration(math.MinInt64)
		default:
			return time.Duration(rapid.Int64().Draw(t, "any"))
		}
	})
}

func testDrainTime(t *testing.T, impl Impl) {
	def := fakegpu.DefaultConfig() // 8 slots of 100 ms: 80 requests per second
	suitekit.NoteSeed(t)
	rapid.Check(t, func(rt *rapid.T) {
		waiting, cfg := drainGen().Draw(rt, "waiting"), def
		cfg.Slots = slotsGen().Draw(rt, "slots")
		cfg.Work = workGen(cfg.Slots).Draw(rt, "work")
		if cfg.Work > 0 && rapid.Bool().Draw(rt, "at the edge") {
			// A line at the edge of overflow: waiting × Work just fits in a
			// Duration (then the answer is exact), or just does not.
			edge := int64(lab.InfDuration / cfg.Work)
			off := rapid.Int64Range(-1, 1).Draw(rt, "off the edge")
			if off > 0 && edge > math.MaxInt64-off {
				off = 0
			}
			waiting = int(max(edge+off, 1))
		}
		var got time.Duration
		call := fmt.Sprintf("DrainTime(%d, {Slots: %d, Work: %v})", waiting, cfg.Slots, cfg.Work)
		if msg := suitekit.Report(call, func() { got = impl.DrainTime(waiting, cfg) }); msg != "" {
			rt.Fatal(msg)
		}
		if ok, want := drainOK(got, waiting, cfg.Slots, cfg.Work); !ok {
			rt.Fatalf("%s = %v (%d ns); want %s", call, got, int64(got), want)
		}
	})
	tests := []struct {
		waiting     int
		slots       int
		work        time.Duration
		want        time.Duration
		description string
	}{
		{0, def.Slots, def.Work, 0, "an empty line"},
		{1, def.Slots, def.Work, 12500 * time.Microsecond, "1 / 80 per second"},
		{16, def.Slots, def.Work, 200 * time.Millisecond, "the lesson's line: 16 / 80 per second"},
		{80, def.Slots, def.Work, time.Second, "80 / 80 per second"},
		{2000, def.Slots, def.Work, 25 * time.Second, "Break It 3: 2000 / 80 per second"},
		{10, 4, 250 * time.Millisecond, 625 * time.Millisecond, "10 / 16 per second"},
		{-3, def.Slots, def.Work, 0, "no line"},
		{5, 0, def.Work, 0, "no slots"},
		{5, def.Slots, 0, 0, "no work"},
	}
	for _, tt := range tests {
		cfg := def
		cfg.Slots, cfg.Work = tt.slots, tt.work
		var got time.Duration
		guard(t, "DrainTime", func() { got = impl.DrainTime(tt.waiting, cfg) })
		if got != tt.want {
			t.Errorf("DrainTime(%d, {Slots: %d, Work: %v}) = %v; want exactly %v (%s: waiting / capacity, capacity = Slots / Work)",
				tt.waiting, tt.slots, tt.work, got, tt.want, tt.description)
		}
	}
}

// drainGen draws a number waiting: small lines, long ones, none, negative
// and absurd.
func drainGen() *rapid.Generator[int] {
	return rapid.Custom(func(t *rapid.T) int {
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			return rapid.IntRange(-5, 100).Draw(t, "small")
		case 1:
			return int(spread(t, 0, 1_000_000, "long"))
		case 2:
			return int(spread(t, 0, math.MaxInt64, "huge"))
		case 3:
			return math.MaxInt - rapid.IntRange(0, 1000).Draw(t, "below max")
		default:
			return rapid.Int().Draw(t, "any")
		}
	})
}

// slotsGen draws a number of slots, mostly 1 to 16, sometimes none or
// negative, sometimes many.
func slotsGen() *rapid.Generator[int] {
	return rapid.Custom(func(t *rapid.T) int {
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			return rapid.IntRange(1, 16).Draw(t, "few")
		case 1:
			return rapid.IntRange(-3, 0).Draw(t, "none")
		case 2:
			return int(spread(t, 1, 10000, "many"))
		default:
			return rapid.Int().Draw(t, "any")
		}
	})
}

// workGen draws a work time: whole milliseconds, any nanoseconds up to a
// minute, a multiple of slots nanoseconds (so waiting × Work / Slots is a
// whole number of nanoseconds that floating point may miss), none (0 or
// just below), negative or huge.
func workGen(slots int) *rapid.Generator[time.Duration] {
	return rapid.Custom(func(t *rapid.T) time.Duration {
		switch rapid.IntRange(0, 6).Draw(t, "kind") {
		case 0:
			return time.Duration(spread(t, 1, 2000, "ms")) * time.Millisecond
		case 1:
			return time.Duration(spread(t, 1, int64(time.Minute), "ns"))
		case 2:
			if slots > 0 && slots <= 1<<20 {
				return time.Duration(slots) * time.Duration(spread(t, 1, int64(time.Second), "per slot"))
			}
			return time.Second
		case 3:
			return -time.Duration(spread(t, 0, int64(time.Hour), "neg"))
		case 4:
			return time.Duration(spread(t, int64(time.Minute), math.MaxInt64, "huge"))
		case 5:
			return time.Duration(rapid.Int64Range(-3, 0).Draw(t, "none"))
		default:
			return time.Duration(rapid.Int64().Draw(t, "any"))
		}
	})
}

// drainOK reports whether got is what DrainTime promises for waiting, slots
// and work, and if not, says what it should be: 0 without a line, slots or
// work; otherwise waiting × work / slots to the nanosecond (exact when that
// divides, else rounded either way), and lab.InfDuration when it does not
// fit in a Duration. When only the product waiting × work overflows, either
// lab.InfDuration or the exact quotient will do.
func drainOK(got time.Duration, waiting, slots int, work time.Duration) (bool, string) {
	if waiting <= 0 || slots <= 0 || work <= 0 {
		return got == 0, "0 (no line, no slots or no work)"
	}
	p := new(big.Int).Mul(big.NewInt(int64(waiting)), big.NewInt(int64(work)))
	q, r := new(big.Int).QuoRem(p, big.NewInt(int64(slots)), new(big.Int))
	exact := fmt.Sprintf("%d × %d ns / %d = %s", waiting, int64(work), slots, q)
	if r.Sign() != 0 {
		exact += fmt.Sprintf(" and %s/%d", r, slots)
	}
	if !q.IsInt64() {
		return got == lab.InfDuration, fmt.Sprintf("lab.InfDuration (%s ns does not fit in a Duration)", exact)
	}
	productOverflows := !p.IsInt64()
	if productOverflows && got == lab.InfDuration {
		return true, ""
	}
	lo := q.Int64()
	var want string
	ok := int64(got) == lo
	if r.Sign() == 0 {
		want = fmt.Sprintf("exactly %v (%s ns: compute it in integer nanoseconds)", time.Duration(lo), exact)
	} else {
		ok = ok || (lo < math.MaxInt64 && int64(got) == lo+1)
		want = fmt.Sprintf("%v or a nanosecond more (%s ns)", time.Duration(lo), exact)
	}
	if productOverflows {
		want += ", or lab.InfDuration since waiting × Work overflows a Duration"
	}
	return ok, want
}

// ceilSeconds is the suite's own RetryAfterSeconds, to compute the values the
// code under test must produce.
func ceilSeconds(d time.Duration) int {
	s := int(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}

// drainRange returns the least and the most DrainTime(waiting, cfg) may
// be: the exact quotient rounded down, and a nanosecond more when it does
// not divide. The suite uses it only where nothing overflows.
func drainRange(waiting int, cfg fakegpu.Config) (lo, hi time.Duration) {
	if waiting <= 0 || cfg.Slots <= 0 || cfg.Work <= 0 {
		return 0, 0
	}
	p := new(big.Int).Mul(big.NewInt(int64(waiting)), big.NewInt(int64(cfg.Work)))
	q, r := new(big.Int).QuoRem(p, big.NewInt(int64(cfg.Slots)), new(big.Int))
	lo = time.Duration(q.Int64())
	if r.Sign() != 0 {
		return lo, lo + 1
	}
	return lo, lo
}

// spread draws an int64 from lo to hi spread over the whole range: rapid
// favours small numbers, so it first picks one of 64 equal stretches, then
// a number within it. Shrinking still heads for lo.
func spread(t *rapid.T, lo, hi int64, label string) int64 {
	if hi-lo < 1<<12 || hi-lo < 0 {
		return rapid.Int64Range(lo, hi).Draw(t, label)
	}
	width := (hi-lo)/64 + 1
	k := rapid.Int64Range(0, 63).Draw(t, label+" (64ths)")
	from := lo + k*width
	to := min(from+width-1, hi)
	if from > hi {
		from = hi
	}
	return from + rapid.Int64Range(0, to-from).Draw(t, label)
}
