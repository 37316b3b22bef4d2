package suitekit

import (
	"math"
	mrand "math/rand/v2"
	"time"
)

// ClockStep returns how far a wall clock moves between two readings, from
// everything one may do: stand still (one time in six), move on by a
// nanosecond to an hour, or step back, one time in four, by a microsecond
// to an hour (most often by less than a second), as after an NTP correction or a failover to a Redis replica
// whose clock is behind. Only a monotonic clock never steps back; Redis's
// TIME and a time.Time without its monotonic reading may.
func ClockStep(rng *mrand.Rand) time.Duration {
	switch r := rng.IntN(12); {
	case r < 2:
		return 0
	case r < 5: // back, spread evenly over the orders of magnitude
		return -time.Duration(math.Pow(10, 3+rng.Float64()*9.55)) // 1 µs to about an hour
	case r < 7:
		return time.Duration(1 + rng.Int64N(int64(time.Millisecond)))
	case r < 10:
		return time.Duration(1 + rng.Int64N(int64(10*time.Second)))
	}
	return time.Duration(1 + rng.Int64N(int64(time.Hour)))
}

// ClockSteps returns n steps drawn with ClockStep.
func ClockSteps(rng *mrand.Rand, n int) []time.Duration {
	steps := make([]time.Duration, n)
	for i := range steps {
		steps[i] = ClockStep(rng)
	}
	return steps
}
