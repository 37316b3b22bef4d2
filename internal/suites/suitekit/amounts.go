package suitekit

import (
	"math"
	mrand "math/rand/v2"
)

// ExtremeAmount returns a non-negative float64 from the ends of the range
// a rate (per second) or a size (tokens, a burst) may take where a
// contract allows any number of zero or more: 0, the smallest positive
// float64, tiny and huge powers of ten, numbers spread over all of
// float64's orders of magnitude, and math.MaxFloat64. Suites mix it with
// the everyday values they draw themselves, so that code which overflows,
// divides by zero or loses a result to rounding only at the ends is seen.
func ExtremeAmount(rng *mrand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return math.SmallestNonzeroFloat64
	case 2:
		return math.MaxFloat64
	case 3:
		return []float64{1e-300, 1e-12, 1e-6, 1e9, 1e12, 1e18, 1e100, 1e300}[rng.IntN(8)]
	default:
		return math.Pow(10, -307+615*rng.Float64()) // 1e-307 to 1e308
	}
}

// ExtremeRateAndSize returns a rate and a size (a bucket's rate and burst)
// drawn with ExtremeAmount, or, one time in two, both huge together
// (1e280 and up), where an intermediate product of the two overflows
// although neither the answer nor either input does.
//
// At a positive rate the time to fill size, size/rate seconds, stays below
// a quarter of math.MaxFloat64: a correct bucket kept as seconds owed
// (GCRA) cannot hold more, and no check can wait that long anyway. A pair
// beyond it is drawn again.
func ExtremeRateAndSize(rng *mrand.Rand) (rate, size float64) {
	for {
		if rng.IntN(2) == 0 {
			rate, size = math.Pow(10, 280+28*rng.Float64()), math.Pow(10, 280+28*rng.Float64())
		} else {
			rate, size = ExtremeAmount(rng), ExtremeAmount(rng)
		}
		if rate == 0 || size/rate < math.MaxFloat64/4 {
			return rate, size
		}
	}
}
